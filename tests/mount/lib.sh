# Mounting for the tests: every mount made through mount_view runs the
# daemon in the foreground (its log in $T/daemon-N.log) and is unmounted
# when the script exits, however it exits.  Unmounts go by the path that
# was mounted, never by process name.  unmount_view also checks that the
# daemon exited 0 and that its log holds no sanitizer report.
. "$(dirname "${BASH_SOURCE[0]}")/../cli/lib.sh"

# 1 in a sanitizer build: bounds on memory are not asserted there (ASan's
# own memory would cross them)
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
	wait
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
	if grep -qE "AddressSanitizer|LeakSanitizer|runtime error" "${daemon_log[$1]}"; then
		bad "daemon on $1: sanitizer report"
		cat "${daemon_log[$1]}" >&2
	else
		ok
	fi
}

# counter MNT NAME: a counter of MNT/.shardfs/status
counter() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["counters"][sys.argv[2]])' "$1/.shardfs/status" "$2"; }
