# Shared by the command-line tests: BUILD and SOURCE dirs, a scratch dir
# removed on every exit, checks that count, and the closing tally line.
set -u
BUILD=$1
TESTS=$2
PATH="$BUILD:$BUILD/tests:$PATH"
T=$(mktemp -d /tmp/shardfs-cli-XXXXXX)
trap 'rm -rf "$T"' EXIT
passed=0
failed=0

ok() { passed=$((passed + 1)); }
bad() { failed=$((failed + 1)); printf 'FAIL: %s\n' "$*" >&2; }

# expect_eq NAME GOT WANT
expect_eq() {
	if [ "$2" == "$3" ]; then ok; else
		bad "$1"; printf '  got:  %s\n  want: %s\n' "$2" "$3" >&2
	fi
}

# expect_run NAME STATUS STDERR -- CMD...: exit status and exact stderr
expect_run() {
	local name=$1 status=$2 want=$3 got rc
	shift 4
	got=$("$@" 2>&1 >/dev/null)
	rc=$?
	expect_eq "$name (status)" "$rc" "$status"
	expect_eq "$name (message)" "$got" "$want"
}

# Plan option sets that between them exercise every plan option: checked
# against the Python reference (test_plan.sh) and, with more, against the
# plans' known bytes (test_plan_bytes.sh)
PLAN_OPTION_SETS=("world=1" "world=4,workers=2" "world=3,workers=3,epoch=5,seed=77"
	"world=2,workers=2,shuffle=samples,block=7,epoch=2"
	"world=5,remainder=drop,batch=4,start=31" "world=1024,workers=1"
	"world=2,workers=4,shuffle=none,block=3,start=2,batch=2"
	"world=3,workers=2,batch=4,partition=interleaved,epoch=1"
	"world=2,workers=3,batch=5,block=9,start=40,remainder=drop,partition=interleaved"
	"world=4,workers=2,replicas=2,shuffle=samples,batch=3"
	"world=6,workers=2,replicas=3,partition=interleaved,batch=2,remainder=drop,block=5")

# expect_reference SRC REFERENCE_INPUT OPTIONS: shardfs-plan's plan of SRC
# under OPTIONS is the one tests/plan/plan_reference.py computes from
# REFERENCE_INPUT (SRC's manifest, or the mixture file)
expect_reference() {
	local got
	shardfs-plan "$1" -o "$3" --json > "$T/plan.json"
	got=$(python3 "$TESTS/plan/plan_reference.py" "$2" "$T/plan.json")
	expect_eq "$1 $3 matches the reference" "$?" "0" || echo "$got"
}

finish() {
	printf '%d passed, %d failed\n' "$passed" "$failed"
	[ "$failed" -eq 0 ]
}
