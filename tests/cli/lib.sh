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

finish() {
	printf '%d passed, %d failed\n' "$passed" "$failed"
	[ "$failed" -eq 0 ]
}
