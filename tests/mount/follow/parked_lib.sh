# Sourced by the test_follow_parked*.sh tests, after tests/lib.sh: a
# followed JSONL source whose first shard lies on storage that stops
# answering (slowfs, stopped with SIGSTOP, bound over the shard's name so
# that listing the source stays quick), its pages dropped from the page
# cache, and a reader parked in window 0 whose reply reads that shard.

S=$T/src
M=$T/m
W=$M/0/0
bound=
# the view first (its daemon holds the shard), the binding, then slowfs,
# woken first: nothing of it answers while it is stopped
parked_on_exit() {
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
trap parked_on_exit EXIT

# waiting: whether the status shows the reader waiting
waiting() {
	python3 -c 'import json, sys
print(json.load(open(sys.argv[1]))["readers"][0]["waiting"])' \
		"$M/.shardfs/status"
}

# parked_start: mount the view of S (window=2) on M; start a reader of
# window 0 (c0's sample and the next; pid in reader, its bytes in
# $T/a.out, its errors in $T/a.err), parked: no window yet; drop c0's
# pages and stop its storage, so that the reply that reads them waits;
# then write c1..c3 and wait (10 s at most) for window 1 to be listed
parked_start() {
	local i k
	mkdir -p "$S" "$T/slow"
	echo '{"id": 0}' > "$T/slow/c0.jsonl"
	: > "$S/c0.jsonl" # where the slow shard is bound
	mount_slowfs "$T/slow" "$T/slow-m" latency=0 || exit 1
	mount --bind "$T/slow-m/c0.jsonl" "$S/c0.jsonl" && bound=1 ||
		bad "bind the slow shard"
	mount_view "$S" "$M" "follow=1,follow_interval=1,follow_timeout=60,format=jsonl,window=2,world=1,workers=1,shuffle=none,prefetch=0" ||
		bad "mount"
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
}

# parked_end: take the binding and slowfs down (the view is gone), and
# nothing of the test may stay mounted
parked_end() {
	umount "$S/c0.jsonl" && bound=
	unmount_slowfs "$T/slow-m"
	expect_eq "nothing of this test left mounted" \
		"$(awk -v t="$T" 'index($2, t) == 1' /proc/mounts | wc -l)" 0
}
