#!/usr/bin/env bash
# follow=1 (docs/follow.md): a read of a stream parked past its end is
# answered, once its bytes come, on a thread of its own.  A review found
# it answered on the watcher's thread, so that a reply waiting for a slow
# source (its splice reads the shard) held back the next window.  Here
# the first shard lies on storage that stops answering (slowfs, stopped
# with SIGSTOP, bound over the shard's name so that listing the source
# stays quick), its pages dropped from the page cache; a reader parked
# for the window it is in waits for it, and the next window must appear
# all the same.  Mounts and unmounts (tests/lib.sh).
. "$(dirname "$0")/../../lib.sh"

S=$T/src
M=$T/m
W=$M/0/0
mkdir -p "$S" "$T/slow"
echo '{"id": 0}' > "$T/slow/c0.jsonl"
: > "$S/c0.jsonl" # where the slow shard is bound
bound=
# the view first (its daemon holds the shard), the binding, then slowfs,
# woken first: nothing of it answers while it is stopped
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

# waiting: whether the status shows the reader waiting
waiting() {
	python3 -c 'import json, sys
print(json.load(open(sys.argv[1]))["readers"][0]["waiting"])' \
		"$M/.shardfs/status"
}
# a reader of window 0 (c0's sample and the next), parked: no window yet
timeout 60 head -c 20 "$W/stream.jsonl" > "$T/a.out" &
reader=$!
for i in $(seq 100); do
	[ "$(waiting)" = True ] && break
	sleep 0.05
done
expect_eq "the reader waits for window 0" "$(waiting)" True
# c0's bytes no longer cached, and its storage stopped: the reply that
# reads them waits
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
expect_eq "window 1 comes while the reply of window 0 waits for its source" \
	"$(ls "$W")" "stream.jsonl
window-00000000.jsonl
window-00000001.jsonl"
expect_eq "the reply waits" "$(wc -c < "$T/a.out")" 0
kill -CONT "$slow_pid"
wait "$reader"
expect_eq "the reader's read, answered once the source answers" \
	"$(cat "$T/a.out")" '{"id": 0}
{"id": 1}'
unmount_view "$M"
umount "$S/c0.jsonl" && bound=
unmount_slowfs "$T/slow-m"

expect_eq "nothing of this test left mounted" \
	"$(awk -v t="$T" 'index($2, t) == 1' /proc/mounts | wc -l)" 0
finish
