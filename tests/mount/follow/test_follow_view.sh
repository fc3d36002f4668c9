#!/usr/bin/env bash
# follow=1 (docs/follow.md, "What readers see"): a followed source's files
# have what a view's have.
#   a. its directories answer readdirplus: `ls -l` of a worker's directory
#      takes no lookup of its entries, and shows the windows' exact sizes
#      and the stream's size now, also right after it grew; a listing
#      opened before a window came lists what it was opened on, and
#      every file keeps its inode as the source grows
#   b. window files and streams carry extended attributes, as a view's
#      files do: the shards a window reads, its samples as the stream's
#      sample numbers, its padding, its window (epoch); a stream's source
#      and its samples so far
#   c. over slow storage (slowfs), the prefetcher reads the windows after
#      the one a reader reached, of those built only: exact counters,
#      for window files and for the stream, and as windows come; the
#      bytes read are the shards'
#      (shards of 6 samples in windows of 4: what of a window is there
#      before it is built is not read ahead)
#   d. readers that open a shard at once (over slowfs: each open takes
#      20 ms) leave one descriptor of it in the daemon, not one each (a
#      consumed and deleted shard's descriptors are all closed)
#   e. a shard consumed and deleted while its chunks wait in the
#      prefetcher's queue: they are dropped, not errors; the daemon keeps
#      no descriptor of it; its windows leave ls -l (readdirplus)
#   f. the read-ahead stays within prefetch_mb past the window reached,
#      however many windows the reader reached
# Mounts and unmounts (tests/lib.sh); as root.
. "$(dirname "$0")/../../lib.sh"

# shard DIR NAME FIRST: 4 samples of 9 bytes ({"i":FIRST} ... FIRST+3,
# two digits each), written under a temporary name, then renamed
shard() {
	local i
	for i in 0 1 2 3; do printf '{"i":%02d}\n' $(($3 + i)); done >"$1/.$2.tmp"
	mv "$1/.$2.tmp" "$1/$2"
}
# requests MNT FROM OPCODE [NODEID]: requests of OPCODE (of inode NODEID)
# in MNT's daemon log (-d) after its line FROM
requests() {
	tail -n +"$(($2 + 1))" "${daemon_log[$1]}" |
		grep -c "opcode: $3 ([0-9]*), nodeid: ${4:-[0-9]*},"
}

printf '== a. readdirplus\n'
mkdir -p "$T/a"
shard "$T/a" c0.jsonl 0
shard "$T/a" c1.jsonl 4
DAEMON_FLAGS=-d mount_view "$T/a" "$T/a-m" "follow=1,window=4" ||
	bad "mount a"
W=$T/a-m/0/0
# worker 0 of rank 0: its directory's inode
WORKER_INO=$(stat -c %i "$W")
from=$(wc -l <"${daemon_log[$T/a-m]}")
expect_eq "a: ls -l shows the windows' and the stream's exact sizes" \
	"$(ls -l "$W" | awk 'NR > 1 { print $5, $NF }')" \
	"72 stream.jsonl
36 window-00000000.jsonl
36 window-00000001.jsonl"
expect_eq "a: the listing was a readdirplus" \
	"$(requests "$T/a-m" "$from" READDIRPLUS $WORKER_INO | grep -qv '^0$' && echo yes)" yes
expect_eq "a: and the kernel looked up none of its entries" \
	"$(requests "$T/a-m" "$from" LOOKUP $WORKER_INO)" 0
# the stream grows: the size the listing gave is not kept
inos=$(stat -c '%i %n' "$W" "$W/stream.jsonl" "$W/window-00000000.jsonl")
exec {dirfd}<"$W" # a listing opened now, read once the window came
shard "$T/a" c2.jsonl 8
for i in $(seq 100); do
	[ -e "$W/window-00000002.jsonl" ] && break
	sleep 0.1
done
expect_eq "a: a listing opened before the window came lists what it was opened on" \
	"$(python3 -c 'import os; print(*sorted(os.listdir(3)))' 3<&$dirfd)" \
	"stream.jsonl window-00000000.jsonl window-00000001.jsonl"
exec {dirfd}<&-
expect_eq "a: the directory, the stream and a window keep their inodes as it grows" \
	"$(stat -c '%i %n' "$W" "$W/stream.jsonl" "$W/window-00000000.jsonl")" \
	"$inos"
expect_eq "a: once a window more is there, stat shows the stream's new size" \
	"$(stat -c '%s %n' "$W/stream.jsonl")" "108 $W/stream.jsonl"
expect_eq "a: and so does ls -l" \
	"$(ls -l "$W" | awk 'NR > 1 { print $5, $NF }')" \
	"108 stream.jsonl
36 window-00000000.jsonl
36 window-00000001.jsonl
36 window-00000002.jsonl"
expect_eq "a: the windows' bytes" \
	"$(cat "$W"/window-* | sort | tr -d '\n')" \
	'{"i":00}{"i":01}{"i":02}{"i":03}{"i":04}{"i":05}{"i":06}{"i":07}{"i":08}{"i":09}{"i":10}{"i":11}'
unmount_view "$T/a-m"

printf '== b. extended attributes\n'
mkdir -p "$T/b"
shard "$T/b" c0.jsonl 0
shard "$T/b" c1.jsonl 4
printf '{"i":08}\n{"i":09}\n{"i":10}\n' >"$T/b/c2.jsonl"
touch "$T/b/.shardfs-end"
# interleaved, unshuffled: reader 0 takes the even samples, reader 1 the
# odd ones; the last window's 3 samples give reader 1 one of padding
mount_view "$T/b" "$T/b-m" \
	"follow=1,window=8,workers=2,shuffle=none,partition=interleaved" ||
	bad "mount b"
# xattrs FILE: its user.shardfs attributes, as getfattr dumps them
xattrs() { getfattr --absolute-names -d -m - "$1" | tail -n +2; }
expect_eq "b: reader 0's window 0 reads c0 and c1, samples 0,2,4,6" \
	"$(tr -d '\n' <"$T/b-m/0/0/window-00000000.jsonl"; echo; xattrs "$T/b-m/0/0/window-00000000.jsonl")" \
	"{\"i\":00}{\"i\":02}{\"i\":04}{\"i\":06}
user.shardfs.epoch=\"0\"
user.shardfs.padding=\"0\"
user.shardfs.range=\"0,2,4,6\"
user.shardfs.samples=\"4\"
user.shardfs.source=\"$T/b/c0.jsonl\\012$T/b/c1.jsonl\""
expect_eq "b: reader 1's last window: sample 8 again as padding" \
	"$(tr -d '\n' <"$T/b-m/0/1/window-00000001.jsonl"; echo; xattrs "$T/b-m/0/1/window-00000001.jsonl")" \
	"{\"i\":09}{\"i\":08}
user.shardfs.epoch=\"1\"
user.shardfs.padding=\"1\"
user.shardfs.range=\"9,8\"
user.shardfs.samples=\"2\"
user.shardfs.source=\"$T/b/c2.jsonl\""
expect_eq "b: one attribute's value, as a loader asks for it" \
	"$(getfattr --absolute-names --only-values -n user.shardfs.source "$T/b-m/0/0/window-00000000.jsonl")" \
	"$T/b/c0.jsonl
$T/b/c1.jsonl"
expect_eq "b: a stream: its source and its samples in the windows so far" \
	"$(xattrs "$T/b-m/0/1/stream.jsonl")" \
	"user.shardfs.padding=\"1\"
user.shardfs.samples=\"6\"
user.shardfs.source=\"$T/b\""
expect_eq "b: a stream has no range, a directory no attribute" \
	"$(getfattr --absolute-names -n user.shardfs.range "$T/b-m/0/0/stream.jsonl" 2>&1; xattrs "$T/b-m/0/0")" \
	"$T/b-m/0/0/stream.jsonl: user.shardfs.range: No such attribute"
unmount_view "$T/b-m"

printf '== c. prefetch\n'
# bigshard DIR K [N]: c<K>.jsonl, N (4) lines of about 1 KB, each line's
# size its own
bigshard() {
	python3 - "$1/.c$2.tmp" "$2" "${3:-4}" <<'PY'
import sys
k = int(sys.argv[2])
with open(sys.argv[1], "w") as f:
    for i in range(int(sys.argv[3])):
        f.write('{"k":%d,"i":%d,"pad":"%s"}\n' % (k, i, "x" * (1000 + 97 * k + i)))
PY
	mv "$1/.c$2.tmp" "$1/c$2.jsonl"
}
# bytes FILES...: their sizes added
bytes() { stat -c %s "$@" | awk '{ s += $1 } END { print s }'; }
# lines FILE FROM TO: the bytes of its lines FROM..TO (from 1)
lines() { sed -n "$2,$3p" "$1" | wc -c; }
# ahead MNT: bytes read ahead, or found in the source's page cache (the
# daemon's own indexing of a shard reads it) and not read again
ahead() { echo $(($(counter "$1" prefetch_bytes) + $(counter "$1" prefetch_cached_bytes))); }
# prefetched MNT FILES: prefetch_files once it is FILES (10 s at most)
prefetched() {
	local i n
	for i in $(seq 100); do
		n=$(counter "$1" prefetch_files)
		[ "$n" -ge "$2" ] && break
		sleep 0.1
	done
	echo "$n"
}
mkdir -p "$T/c" "$T/c-slow" "$T/c-idx"
for k in 0 1 2 3 4 5; do bigshard "$T/c" $k; done
touch "$T/c/.shardfs-end"
# the view over slowfs goes first: its daemon holds files of it
on_exit() {
	if mountpoint -q "$T/c-m"; then
		fusermount3 -u "$T/c-m" || umount -l "$T/c-m"
	fi
	if [ -n "$slow_pid" ]; then
		fusermount3 -u "$T/c-slow" || umount -l "$T/c-slow"
		wait "$slow_pid"
	fi
	unmount_all
}
trap on_exit EXIT
mount_slowfs "$T/c" "$T/c-slow" latency=1
# slowfs is read-only: the follow log goes to index=
C="follow=1,window=4,shuffle=none,index=$T/c-idx,prefetch_files=2,prefetch_threads=2"
mount_view "$T/c-slow" "$T/c-m" "$C" || bad "mount c"
same=0
for k in 0 1 2 3 4 5; do
	cmp -s "$T/c-m/0/0/window-0000000$k.jsonl" "$T/c/c$k.jsonl" &&
		same=$((same + 1))
done
expect_eq "c: the window files, read in order, are the shards" "$same" 6
expect_eq "c: windows 1 to 5 read ahead, whole, once each" \
	"$(prefetched "$T/c-m" 5) $(ahead "$T/c-m")" \
	"5 $(bytes "$T"/c/c[1-5].jsonl)"
expect_eq "c: no prefetch error, nothing dropped" \
	"$(counter "$T/c-m" prefetch_errors) $(counter "$T/c-m" prefetch_dropped)" "0 0"
unmount_view "$T/c-m"
mount_view "$T/c-slow" "$T/c-m" "$C" || bad "mount c (stream)"
expect_eq "c: the stream, read through, is the shards" \
	"$(cat "$T/c-m/0/0/stream.jsonl" | cmp - <(cat "$T"/c/c[0-5].jsonl) && echo same)" same
expect_eq "c: reading the stream reads windows 1 to 5 ahead" \
	"$(prefetched "$T/c-m" 5) $(ahead "$T/c-m")" \
	"5 $(bytes "$T"/c/c[1-5].jsonl)"
unmount_view "$T/c-m"
# a source that grows: only what is built is read ahead.  Shards of 6
# samples, windows of 4: c0 to c2 make windows 0 to 3, and half of window
# 4 (c2's last 2 samples); window 4 is built once c3 comes
mkdir -p "$T/g" "$T/g-idx"
for k in 0 1 2; do bigshard "$T/g" $k 6; done
unmount_slowfs "$T/c-slow"
# (entries not kept: the new shard is seen at the next listing)
mount_slowfs "$T/g" "$T/c-slow" latency=1,timeout=0
mount_view "$T/c-slow" "$T/c-m" \
	"follow=1,follow_interval=1,window=4,shuffle=none,index=$T/g-idx,prefetch_files=4" ||
	bad "mount c (growing)"
cat "$T/c-m/0/0/window-00000000.jsonl" >/dev/null
# window 1: c0's samples 4, 5 and c1's 0, 1; window 2: c1's 2 to 5;
# window 3: c2's 0 to 3 (4 ranges)
expect_eq "c: growing: windows 1 to 3 read ahead, not the half of window 4" \
	"$(prefetched "$T/c-m" 4) $(sleep 1; ahead "$T/c-m")" \
	"4 $(($(lines "$T/g/c0.jsonl" 5 6) + $(bytes "$T/g/c1.jsonl") + $(lines "$T/g/c2.jsonl" 1 4)))"
bigshard "$T/g" 3 6
for i in $(seq 100); do
	[ -e "$T/c-m/0/0/window-00000005.jsonl" ] && break
	sleep 0.1
done
cat "$T/c-m/0/0/window-00000001.jsonl" >/dev/null
# window 4: c2's 4, 5 and c3's 0, 1; window 5: c3's 2 to 5
expect_eq "c: growing: windows 4 and 5 read ahead once built and window 1 reached" \
	"$(prefetched "$T/c-m" 7) $(sleep 1; ahead "$T/c-m")" \
	"7 $(bytes "$T"/g/c[0-3].jsonl | awk -v a="$(lines "$T/g/c0.jsonl" 1 4)" '{ print $1 - a }')"
unmount_view "$T/c-m"
unmount_slowfs "$T/c-slow"

printf '== d. one descriptor a shard\n'
mkdir -p "$T/d" "$T/d-idx"
for k in 0 1 2 3; do bigshard "$T/d" $k; done
touch "$T/d/.shardfs-end"
mount_slowfs "$T/d" "$T/c-slow" latency=20
# 4 readers, each with samples of every shard: their streams read alike
mount_view "$T/c-slow" "$T/c-m" \
	"follow=1,window=4,workers=4,index=$T/d-idx,prefetch=0" ||
	bad "mount d"
ls "$T"/c-m/0/* >/dev/null
pids=()
for k in 0 1 2 3; do
	cat "$T/c-m/0/$k/stream.jsonl" >"$T/d-read-$k" &
	pids+=($!)
done
wait "${pids[@]}"
expect_eq "d: the streams hold every sample once" \
	"$(cat "$T"/d-read-* | sort | cmp - <(sort "$T"/d/c*.jsonl) && echo same)" same
expect_eq "d: every shard open once in the daemon" \
	"$(ls -l "/proc/${daemon_pid[$T/c-m]}/fd" | grep -o '/c[0-9].jsonl$' | sort | uniq -c | awk '{ print $1 }' | tr '\n' ' ')" \
	"1 1 1 1 "
unmount_view "$T/c-m"
unmount_slowfs "$T/c-slow"

printf '== e. consumed shards, read ahead no more\n'
# over slowfs at 500 ms an operation, one prefetch thread: reaching window
# 0 queues windows 1 to 3, which the job acknowledges at once (it read
# them elsewhere); the producer deletes c0 to c3
mkdir -p "$T/e" "$T/e-idx"
for k in 0 1 2 3; do bigshard "$T/e" $k; done
touch "$T/e/.shardfs-end"
mount_slowfs "$T/e" "$T/c-slow" latency=500,timeout=0
mount_view "$T/c-slow" "$T/c-m" \
	"follow=1,follow_interval=1,window=4,shuffle=none,index=$T/e-idx,prefetch_files=3,prefetch_threads=1" ||
	bad "mount e"
exec 3<"$T/c-m/0/0/window-00000000.jsonl"
echo "0 0 3" >"$T/c-m/.shardfs/ack"
sleep 0.2
rm "$T"/e/c[0-3].jsonl
# the chunks of windows 1 to 3 are dropped, or read, by now
for i in $(seq 100); do
	[ "$(($(counter "$T/c-m" prefetch_dropped) + $(counter "$T/c-m" prefetch_files) + $(counter "$T/c-m" prefetch_errors)))" -ge 3 ] && break
	sleep 0.1
done
sleep 1
exec 3<&-
expect_eq "e: a consumed shard's queued chunks are dropped, no error logged" \
	"$(counter "$T/c-m" prefetch_errors) $(grep -c 'prefetch: ' "${daemon_log[$T/c-m]}")" "0 0"
for i in $(seq 100); do
	[ -e "$T/c-m/0/0/window-00000003.jsonl" ] || break
	sleep 0.1
done
expect_eq "e: the daemon holds no descriptor of a deleted shard" \
	"$(ls -l "/proc/${daemon_pid[$T/c-m]}/fd" | grep -c '/c[0-9].jsonl')" 0
expect_eq "e: the consumed, deleted windows are gone from ls -l" \
	"$(ls -l "$T/c-m/0/0" | awk 'NR > 1 { print $NF }')" "stream.jsonl"
unmount_view "$T/c-m"
unmount_slowfs "$T/c-slow"

printf '== f. read ahead no further than prefetch_mb\n'
# windows of about 600 KB, prefetch_mb=1: a reader that reaches window K
# has the stream read ahead through 1 MiB past it, no further
mkdir -p "$T/f" "$T/f-idx"
for k in 0 1 2 3 4 5 6 7; do
	python3 - "$T/f/.c$k.tmp" "$k" <<'PY'
import sys
with open(sys.argv[1], "w") as f:
    for i in range(4):
        f.write('{"k":%s,"i":%d,"pad":"%s"}\n' % (sys.argv[2], i, "x" * 150000))
PY
	mv "$T/f/.c$k.tmp" "$T/f/c$k.jsonl"
done
touch "$T/f/.shardfs-end"
mount_slowfs "$T/f" "$T/c-slow" latency=1
mount_view "$T/c-slow" "$T/c-m" \
	"follow=1,window=4,shuffle=none,index=$T/f-idx,prefetch_mb=1,prefetch_files=16,prefetch_threads=2" ||
	bad "mount f"
W=$(stat -c %s "$T/f/c0.jsonl")
got=
for k in 0 1 2 3; do
	exec 3<"$T/c-m/0/0/window-0000000$k.jsonl"
	exec 3<&-
	for i in $(seq 50); do
		[ "$(ahead "$T/c-m")" -ge $((k * W + 1048576)) ] && break
		sleep 0.1
	done
	sleep 0.5
	got="$got $(ahead "$T/c-m")"
done
expect_eq "f: read ahead through 1 MiB past each window reached" \
	"$got" " 1048576 $((W + 1048576)) $((2 * W + 1048576)) $((3 * W + 1048576))"
unmount_view "$T/c-m"
unmount_slowfs "$T/c-slow"

expect_eq "nothing of this test left mounted" \
	"$(awk -v t="$T" 'index($2, t) == 1' /proc/mounts | wc -l)" 0
finish
