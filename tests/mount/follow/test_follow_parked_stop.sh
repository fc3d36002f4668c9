#!/usr/bin/env bash
# follow=1 (docs/follow.md): the daemon stopped (SIGTERM) while a parked
# read is being answered aside.  A review found the views freed at the end
# of the session loop while that answer, waiting for a slow source, still
# used its view: the answer read freed memory once the source answered.
# Here the answer must wait for its source and give the reader its bytes,
# and the daemon exit 0 with a clean log (a sanitizer build reports the
# use after free).  The slow shard as in test_follow_parked.sh.  Mounts
# and unmounts (tests/lib.sh).
. "$(dirname "$0")/../../lib.sh"

S=$T/src
M=$T/m
W=$M/0/0
mkdir -p "$S" "$T/slow"
echo '{"id": 0}' > "$T/slow/c0.jsonl"
: > "$S/c0.jsonl" # where the slow shard is bound
bound=
on_exit() {
	[ -z "$slow_pid" ] || kill -CONT "$slow_pid" 2>/dev/null
	if mountpoint -q "$M"; then
		fusermount3 -u "$M" || umount -l "$M"
	fi
	[ -z "$bound" ] || umount "$S/c0.jsonl" || umount -l "$S/c0.jsonl"
	if [ -n "$slow_pid" ]; then
		fusermount3 -u "$T/slow-m" || umount -l "$T/slow-m"
		wait "$slow_pid"
	fi
	unmount_all
}
trap on_exit EXIT
mount_slowfs "$T/slow" "$T/slow-m" latency=0 || exit 1
mount --bind "$T/slow-m/c0.jsonl" "$S/c0.jsonl" && bound=1 ||
	bad "bind the slow shard"
mount_view "$S" "$M" "follow=1,follow_interval=1,follow_timeout=60,format=jsonl,window=2,world=1,workers=1,shuffle=none,prefetch=0" ||
	bad "mount"

waiting() {
	python3 -c 'import json, sys
print(json.load(open(sys.argv[1]))["readers"][0]["waiting"])' \
		"$M/.shardfs/status"
}
# a reader of window 0, parked: no window yet
timeout 60 head -c 20 "$W/stream.jsonl" > "$T/a.out" &
reader=$!
for i in $(seq 100); do
	[ "$(waiting)" = True ] && break
	sleep 0.05
done
expect_eq "the reader waits for window 0" "$(waiting)" True
python3 -c 'import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)' "$T/slow-m/c0.jsonl"
kill -STOP "$slow_pid"
for k in 1 2 3; do
	echo "{\"id\": $k}" > "$S/.c$k.jsonl.tmp"
	mv "$S/.c$k.jsonl.tmp" "$S/c$k.jsonl"
done
for i in $(seq 100); do
	[ -e "$W/window-00000001.jsonl" ] && break
	sleep 0.1
done
expect_eq "the reply of window 0 waits for its source" \
	"$(wc -c < "$T/a.out")" 0
# the daemon told to stop while the answer waits; the source answers after
kill -TERM "${daemon_pid[$M]}"
sleep 1
kill -CONT "$slow_pid"
wait "$reader"
expect_eq "the reader's read, answered once the source answers" \
	"$(cat "$T/a.out")" '{"id": 0}
{"id": 1}'
wait "${daemon_pid[$M]}"
expect_eq "the daemon exits 0" "$?" 0
if grep -qE "AddressSanitizer|LeakSanitizer|runtime error" \
	"${daemon_log[$M]}"; then
	bad "daemon: sanitizer report"
	cat "${daemon_log[$M]}" >&2
else
	ok
fi
umount "$S/c0.jsonl" && bound=
unmount_slowfs "$T/slow-m"

expect_eq "nothing of this test left mounted" \
	"$(awk -v t="$T" 'index($2, t) == 1' /proc/mounts | wc -l)" 0
finish
