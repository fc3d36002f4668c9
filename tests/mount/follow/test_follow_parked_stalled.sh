#!/usr/bin/env bash
# follow=1 (docs/follow.md): the daemon stopped (SIGTERM) while a parked
# read is being answered aside from a source that never answers (slowfs
# stopped, never resumed).  A review found the daemon waiting for that
# answer without limit: it never exited, and the mount stayed.  Here it
# waits 5 seconds, as the prefetcher waits for its reads, then unmounts
# and exits 0 with a log line saying why; the reader gets an error, not
# bytes.  As test_follow_parked_stop.sh until the source stops.  Mounts
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
timeout 60 head -c 20 "$W/stream.jsonl" > "$T/a.out" 2> "$T/a.err" &
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
# the daemon told to stop while the answer waits; the source never answers
t0=$(date +%s.%N)
kill -TERM "${daemon_pid[$M]}"
pid=${daemon_pid[$M]}
for i in $(seq 300); do
	kill -0 "$pid" 2>/dev/null || break
	sleep 0.1
done
t1=$(date +%s.%N)
if kill -0 "$pid" 2>/dev/null; then
	bad "the daemon still runs 30 s after SIGTERM (it waits for the stalled source)"
else
	wait "$pid"
	expect_eq "the daemon exits 0" "$?" 0
	secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%d", b - a}')
	if [ "$secs" -ge 5 ] && [ "$secs" -lt 15 ]; then
		ok
	else
		bad "the daemon exited after $secs s, want 5 to 15 (its bound: 5 s)"
	fi
fi
expect_eq "the exit says why it did not wait" \
	"$(grep -c "^shardfs: exiting while reads of a followed source answered aside still wait for the stalled source: they end with the process$" "${daemon_log[$M]}")" 1
# (bounded: a daemon that never exits leaves a mount nobody answers)
if timeout 10 mountpoint -q "$M"; then
	bad "the mount stays after the daemon exited"
else
	ok
fi
wait "$reader"
rc=$?
expect_eq "the reader gets no byte" "$(wc -c < "$T/a.out")" 0
if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ]; then
	ok
else
	bad "the reader exits $rc, want an error (not 0, not timeout's 124)"
fi
if grep -qE "AddressSanitizer|LeakSanitizer|runtime error" \
	"${daemon_log[$M]}"; then
	bad "daemon: sanitizer report"
	cat "${daemon_log[$M]}" >&2
else
	ok
fi
kill -CONT "$slow_pid"
umount "$S/c0.jsonl" && bound=
unmount_slowfs "$T/slow-m"

expect_eq "nothing of this test left mounted" \
	"$(awk -v t="$T" 'index($2, t) == 1' /proc/mounts | wc -l)" 0
finish
