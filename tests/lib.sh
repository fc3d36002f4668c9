# The one shell library of the tests (tests/README.md): BUILD and TESTS,
# a scratch directory $T, checks that count and the closing tally line,
# and mounting: every mount made through mount_view runs the daemon in the
# foreground (its log in $T/daemon-N.log) and is unmounted when the script
# exits, however it exits (killed by ctest's timeout, too: guard.sh).
# Unmounts go by the path that was mounted,
# never by process name.  unmount_view also checks that the daemon exited
# 0 and that its log holds no sanitizer report.  A test that sets its own
# EXIT trap calls unmount_all from it.
set -u
BUILD=$1
TESTS=$2
PATH="$BUILD:$BUILD/tests:$PATH"
T=$(mktemp -d /tmp/shardfs-cli-XXXXXX)
. "$(dirname "${BASH_SOURCE[0]}")/guard.sh"
guard_scratch "$T"
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
# under OPTIONS is the one tests/cli/plan_reference.py computes from
# REFERENCE_INPUT (SRC's manifest, or the mixture file)
expect_reference() {
	local got
	shardfs-plan "$1" -o "$3" --json > "$T/plan.json"
	got=$(python3 "$TESTS/cli/plan_reference.py" "$2" "$T/plan.json")
	expect_eq "$1 $3 matches the reference" "$?" "0" || echo "$got"
}

# 1 in a sanitizer build: bounds on memory and time are not asserted
# there (ASan's own memory and its slower copies would cross them)
sanitized=0
grep -q '^SHARDFS_SANITIZE:BOOL=ON' "$BUILD/CMakeCache.txt" 2>/dev/null && sanitized=1

mounts=()
declare -A daemon_pid daemon_log
nlog=0
unmount_all() {
	local m
	for m in "${mounts[@]}"; do
		if mountpoint -q "$m"; then
			fusermount3 -u "$m" 2>/dev/null || umount -l "$m"
		fi
	done
	# the daemons started by mount_view (a script that mounted nothing
	# has none to wait for)
	[ ${#mounts[@]} -eq 0 ] || wait
	rm -rf --one-file-system "$T"
}
trap unmount_all EXIT

# mount_view SRC MNT [OPTIONS]: mount, and wait until it answers;
# $DAEMON_FLAGS are added to the daemon's command line (e.g. -s), and
# $DAEMON_WRAP runs it (e.g. "prlimit --nofile=12", valgrind)
mount_view() {
	local i
	mkdir -p "$2"
	mounts+=("$2")
	nlog=$((nlog + 1))
	daemon_log[$2]=$T/daemon-$nlog.log
	${DAEMON_WRAP:-} shardfs "$1" "$2" -f ${DAEMON_FLAGS:-} ${3:+-o "$3"} 2>"${daemon_log[$2]}" &
	daemon_pid[$2]=$!
	for i in $(seq 600); do
		# a daemon that mounted but never serves must not hang the test
		timeout 30 mountpoint -q "$2" && return 0
		kill -0 "${daemon_pid[$2]}" 2>/dev/null || break
		sleep 0.05
	done
	cat "${daemon_log[$2]}" >&2
	return 1
}

# unmount_view MNT: unmount; the daemon must exit 0 with a clean log
unmount_view() {
	local rc
	fusermount3 -u "$1"
	wait "${daemon_pid[$1]}"
	rc=$?
	expect_eq "daemon on $1 exits 0" "$rc" 0
	expect_clean_log "$1"
}

# expect_clean_log MNT: MNT's daemon log holds no sanitizer report
expect_clean_log() {
	if grep -qE "AddressSanitizer|LeakSanitizer|runtime error" "${daemon_log[$1]}"; then
		bad "daemon on $1: sanitizer report"
		cat "${daemon_log[$1]}" >&2
	else
		ok
	fi
}

# wait_log MNT SECONDS TEXT: until MNT's daemon log holds TEXT (SECONDS at
# most); 1 when it does not
wait_log() {
	local i
	for i in $(seq $(($2 * 10))); do
		grep -qF -- "$3" "${daemon_log[$1]}" && return 0
		sleep 0.1
	done
	return 1
}

# traced FILE CMD...: CMD under strace, the threads it starts counted
# into FILE (threads_in); CMD's status.  LeakSanitizer's exit check runs
# in a thread of its own and fails under ptrace: off for CMD.
traced() {
	local out=$1
	shift
	ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 \
		strace -f -qq -e trace=clone,clone3 -c -o "$out" "$@"
}

# threads_in FILE: the threads a traced command started
threads_in() { awk '$NF ~ /^clone/ { n += $4 } END { print n + 0 }' "$1"; }

# parquet_70000 PY FILE: with PY (a Python with pyarrow), FILE a Parquet
# file of 70 000 rows (v, an int64; s, "row N") in row groups of 30 000:
# rows enough for a scan to hash on helper threads
parquet_70000() {
	"$1" -c 'import sys, pyarrow as pa, pyarrow.parquet as pq
n = 70000
pq.write_table(pa.table({"v": pa.array(range(n), pa.int64()),
                         "s": pa.array([f"row {i}" for i in range(n)])}),
               sys.argv[1], row_group_size=30000)' "$2"
}

# mount_slowfs DIR MNT OPTS: slowfs (tests/bench/slowfs.c, slow storage)
# over DIR on MNT with -o OPTS, its pid in slow_pid; 1 when it does not
# mount.  The script unmounts it (unmount_slowfs) after the views over it,
# whose daemons hold its files, on every path.
slow_pid=
mount_slowfs() {
	local i
	mkdir -p "$2"
	slowfs "$1" "$2" -f -o "$3" 2>"$T/slowfs.log" &
	slow_pid=$!
	for i in $(seq 200); do
		mountpoint -q "$2" && return 0
		sleep 0.05
	done
	bad "slowfs did not mount $2"
	return 1
}

# unmount_slowfs MNT: unmount the slowfs on MNT; it must exit 0
unmount_slowfs() {
	fusermount3 -u "$1"
	wait "$slow_pid"
	expect_eq "slowfs exits 0" "$?" 0
	slow_pid=
}

# counter MNT NAME: a counter of MNT/.shardfs/status
counter() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["counters"][sys.argv[2]])' "$1/.shardfs/status" "$2"; }

finish() {
	printf '%d passed, %d failed\n' "$passed" "$failed"
	[ "$failed" -eq 0 ]
}
