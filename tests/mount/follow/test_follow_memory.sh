#!/usr/bin/env bash
# follow=1 (docs/follow.md): what one chunk can cost the daemon.  A chunk's
# boundaries cost 8 bytes a sample until its windows are laid out, so a
# chunk of more than 16777216 samples (SFS_FOLLOW_CHUNK_SAMPLES_MAX) waits
# with a log line naming it, the limit and the fix, and its scan stops at
# the limit: a 100 MB chunk of empty lines (10^8 samples) took the daemon
# to 800 MB; the peak is asserted under a generous bound (as
# tests/mount/test_hostile.sh does; not in a sanitizer build), never a
# speed.  Replaced by a smaller
# chunk, the stream goes on.  Mounts and unmounts (tests/lib.sh).
. "$(dirname "$0")/../../lib.sh"

# hwm PID: the process's peak resident memory, kB
hwm() { awk '/^VmHWM:/ {print $2}' "/proc/$1/status"; }

S=$T/src
M=$T/m
mkdir -p "$S"
printf 'a\nb\nc\n' > "$S/c0.jsonl"
mount_view "$S" "$M" "follow=1,follow_interval=1,follow_timeout=30,format=jsonl,window=4,world=1,workers=1" ||
	bad "mount"
head -c 100000000 /dev/zero | tr '\0' '\n' > "$S/.c1.jsonl.tmp"
mv "$S/.c1.jsonl.tmp" "$S/c1.jsonl"
wait_log "$M" 30 "c1.jsonl: waiting: c1.jsonl: holds more than 16777216 samples, the most a followed chunk may (8 bytes of the daemon's memory each until its windows are laid out): write smaller chunks (tried again when it changes)" &&
	ok || bad "a chunk of 10^8 samples: the waiting line"
peak=$(hwm "${daemon_pid[$M]}")
if [ "$sanitized" == 1 ] || [ "$peak" -lt 300000 ]; then ok; else
	bad "the daemon's peak memory: ${peak} kB, over 300000 kB"
fi
expect_eq "c1.jsonl waits: no window yet" "$(timeout 10 ls "$M/0/0")" \
	"stream.jsonl"

printf 'd\ne\n' > "$S/.c1.jsonl.tmp"
mv "$S/.c1.jsonl.tmp" "$S/c1.jsonl"
touch "$S/.shardfs-end"
for i in $(seq 100); do
	[ -e "$M/0/0/window-00000001.jsonl" ] && break
	sleep 0.1
done
expect_eq "the stream: the 5 samples of c0 and the new c1, each once" \
	"$(timeout 30 sort "$M/0/0/stream.jsonl" | uniq -c | awk '{print $1, $2}')" \
	"$(printf '1 %s\n' a b c d e)"
unmount_view "$M"

expect_eq "nothing of this test left mounted" \
	"$(awk -v t="$T" 'index($2, t) == 1' /proc/mounts | wc -l)" 0
finish
