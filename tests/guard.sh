#!/usr/bin/env bash
# guard.sh PID DIR: once process PID is gone, however it went, unmount
# whatever is still mounted beneath DIR (deepest first, each by its path)
# and remove DIR.  A test script starts it on its scratch directory
# (guard_scratch below): ctest's timeout kills a test and its children
# with SIGKILL, which no trap sees, and would leave the test's mounts
# behind, their daemons dead ("Transport endpoint is not connected").
# The guard runs in a session of its own, outside the test's process
# tree, so the same kill does not reach it.  What it unmounts it says in
# $GUARD_LOG, which tests/run-all.sh prints.
#
# Sourced (". guard.sh"), it defines guard_scratch DIR (start a guard on
# DIR for the calling script) and unmount_beneath DIR (the same sweep at
# once, for a script's own EXIT trap).
GUARD_LOG=${GUARD_LOG:-/tmp/shardfs-tests-guard.log}

# unmount_beneath DIR: every mount beneath DIR, deepest first.  findmnt
# escapes a path's blanks, newlines and backslashes (\xHH); decoded, the
# paths go on NUL-separated: a newline in one must not make two.
unmount_beneath() {
	local m
	findmnt -rn -o TARGET | while IFS= read -r m; do
		printf -v m '%b' "$m"
		case $m in "$1"/*) printf '%s\0' "$m" ;; esac
	done | sort -rz | while IFS= read -r -d '' m; do
		fusermount3 -u "$m" 2>/dev/null || umount -l "$m"
		printf '%s\n' "$m"
	done
}

guard_scratch() {
	setsid -f bash "${BASH_SOURCE[0]}" "$$" "$1" </dev/null >/dev/null 2>&1
}

if [ "${BASH_SOURCE[0]}" == "$0" ]; then
	set -u
	# none of the script's descriptors held (a pipe its reader waits on)
	for fd in /proc/$$/fd/*; do
		fd=${fd##*/}
		[ "$fd" -gt 2 ] && [ "$fd" -ne 255 ] && eval "exec $fd>&-"
	done
	tail --pid="$1" -f /dev/null
	left=$(unmount_beneath "$2")
	if [ -n "$left" ]; then
		printf '%s: the test of pid %s ended with these still mounted; unmounted:\n%s\n' \
			"$(date -u +%FT%TZ)" "$1" "$left" >>"$GUARD_LOG"
	fi
	rm -rf --one-file-system "$2"
fi
