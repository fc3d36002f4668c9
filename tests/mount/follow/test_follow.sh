#!/usr/bin/env bash
# follow=1 (docs/follow.md, issue 27) on real mounts: a source that grows
# while readers read it.  This script mounts and unmounts (tests/mount/
# lib.sh: every mount unmounted by its path on any exit); follow_test.py
# writes the chunks, reads the streams and checks what they served:
#   a. two daemons (rank 0 and rank 1 of world=2, workers=2) over an empty
#      source, a producer of random chunks at random intervals deleting
#      consumed shards, then the end: equal counts, every sample once plus
#      only the last window's padding, the window files are the stream,
#      the plan of every window, consumed and progress= at the end
#   b. stream.tar read by tarfile (mode "r|") through requests of at most
#      64 KiB (max_read=65536), stream.tfrecord by a TFRecord reader
#      checking framing and CRC-32C through a plain view's max_read (what
#      the pipe splices); no read copied
#   c. follow_timeout=2 with no producer: EIO after 2 s, and the log
#   d. a chunk written slowly under x.tmp and a dot-file: nothing served
#      until the rename
#   e. chunk_00003 after chunk_00005: refused, never served, logged
#   f. a restart mid-stream: consumed shards deleted, remount with start=P
#   g. a DDP job (gloo, 2 ranks, the pinned torch 2 of
#      tests/python/requirements.txt) over a growing source
#   h. shards changed or deleted before they were consumed; writes; the
#      status read by shardfs.Mount
#   k. windows consumed and deleted are no longer listed
# About a minute and a half on 2 cores; as root (/dev/fuse).
. "$(dirname "$0")/../../lib.sh"
# the environment of the Python suites (tests/python/venv.sh: cached,
# built once): follow_test.py and the DDP job it starts run in it
venv=$(bash "$TESTS/python/venv.sh" "$TESTS/python/requirements.txt") || {
	bad "could not install tests/python/requirements.txt (torch 2)"
	finish
	exit
}
PY=$venv/bin/python
F=$TESTS/mount/follow
FO="follow=1,follow_timeout=60"

# py SCENARIO ARGS...: follow_test.py's checks, counted here
py() {
	local out rc p f
	out=$(timeout 170 $PY "$F/follow_test.py" "$@" 2>&1)
	rc=$?
	printf '%s\n' "$out"
	p=$(grep -c '^ok: ' <<<"$out")
	f=$(grep -c '^FAIL: ' <<<"$out")
	passed=$((passed + p))
	failed=$((failed + f))
	if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
		bad "follow_test.py $1 exited $rc without a failed check"
	fi
}
# log_count MNT TEXT: lines of MNT's daemon log holding TEXT
log_count() { grep -cF -- "$2" "${daemon_log[$1]}"; }
section() { printf '== %s\n' "$*"; }

section "window= must be a multiple of world x workers x batch"
mkdir -p "$T/w" "$T/w-m"
mounts+=("$T/w-m") # unmounted on exit should it mount
expect_run "window=10 for world=2 x workers=2 is refused with the nearest values" 1 \
	"shardfs: window=10 is not a multiple of world/replicas x workers x batch = 4: use window=8 or window=12" \
	-- timeout 10 shardfs "$T/w" "$T/w-m" -f -o follow=1,format=jsonl,window=10,world=2,workers=2

section "a. two daemons, a growing source, consumed shards deleted"
mkdir -p "$T/a" "$T/a-tmp" "$T/a-progress"
A="$FO,format=jsonl,window=40,world=2,workers=2,progress=$T/a-progress"
mount_view "$T/a" "$T/a0" "$A,rank=0" || bad "mount a0"
mount_view "$T/a" "$T/a1" "$A,rank=1" || bad "mount a1"
FOLLOW_PROGRESS=$T/a-progress py grow jsonl "$T/a" "$T/a-tmp" 40 \
	"world=2,workers=2" "$T/a0" "$T/a1"
unmount_view "$T/a0"
unmount_view "$T/a1"

for fmt in tar tfrecord; do
	section "b. stream.$fmt"
	mkdir -p "$T/b-$fmt" "$T/b-$fmt-tmp"
	# the tar stream with small read requests: the daemon passes the
	# user's max_read to FUSE at the mount and again at INIT; the
	# tfrecord stream with a plain view's default, what the pipe
	# splices: a follow mount's reads splice from the shards'
	# descriptors as a view's do, and none is copied
	pipe=$(cat /proc/sys/fs/pipe-max-size) o=
	mr=,max_read=$(((pipe - 16384) / 4096 * 4096))
	[ "$fmt" = tar ] && mr=,max_read=65536 o=$mr
	mount_view "$T/b-$fmt" "$T/b-$fmt-m" \
		"$FO,format=$fmt,window=12,workers=2$o" || bad "mount b-$fmt"
	expect_eq "b-$fmt: the mount's max_read" \
		"$(awk -v m="$T/b-$fmt-m" '$2 == m' /proc/mounts | grep -o 'max_read=[0-9]*')" "${mr#,}"
	py formats "$fmt" "$T/b-$fmt" "$T/b-$fmt-tmp" 12 "world=1,workers=2" \
		"$T/b-$fmt-m"
	expect_eq "b-$fmt: no read copied" \
		"$(counter "$T/b-$fmt-m" copied_reads)" 0
	# df on a follow mount (no index: it crashed the daemon)
	expect_eq "b-$fmt: statfs answers, read-only, and the mount stays" \
		"$(stat -f -c '%b blocks, %c files' "$T/b-$fmt-m"; mountpoint -q "$T/b-$fmt-m" && echo mounted)" \
		"0 blocks, 0 files
mounted"
	expect_eq "b-$fmt: shardfs-check view passes" \
		"$(shardfs-check view "$T/b-$fmt-m" | tail -1; echo "exit ${PIPESTATUS[0]}")" \
		"PASS: disjoint, nothing missing, equal counts, every sample's bytes and order as planned
exit 0"
	unmount_view "$T/b-$fmt-m"
done

section "c. follow_timeout=2, no producer"
mkdir -p "$T/c"
mount_view "$T/c" "$T/c-m" "follow=1,follow_timeout=2,format=jsonl,window=4" ||
	bad "mount c"
py timeout "$T/c-m" 2
# docs/follow.md: the line names the window, the last shard seen (none
# here) and how many samples are missing (the whole window: 4)
expect_eq "the timeout's log line names window 0, no shard and 4 missing samples" \
	"$(grep -cE 'reader 0/0 gave up waiting for window 0 for [23] s: the stream holds 0 samples, the window needs 4 \(4 missing\) after the last shard \(none yet\)' "${daemon_log[$T/c-m]}")" 1
unmount_view "$T/c-m"

section "d. a half-written file and a dot-file are never served"
mkdir -p "$T/d"
mount_view "$T/d" "$T/d-m" "$FO,format=jsonl,window=8,workers=2" ||
	bad "mount d"
py tmp "$T/d" "$T/d-tmp" "$T/d-m"
unmount_view "$T/d-m"

section "e. a shard out of order is refused"
mkdir -p "$T/e"
mount_view "$T/e" "$T/e-m" "$FO,format=jsonl,window=8,workers=2" ||
	bad "mount e"
py order "$T/e" "$T/e-tmp" "$T/e-m"
expect_eq "the log names chunk_00003.jsonl, refused after chunk_00005.jsonl" \
	"$(grep -F chunk_00003.jsonl "${daemon_log[$T/e-m]}" | grep -cF chunk_00005.jsonl)" 1
unmount_view "$T/e-m"

section "f. a restart mid-stream with start="
mkdir -p "$T/f" "$T/f-tmp"
R="$FO,format=jsonl,window=20,world=2,workers=2"
mount_view "$T/f" "$T/f-m1" "$R" || bad "mount f1"
py restart1 "$T/f" "$T/f-tmp" 20 "world=2,workers=2" "$T/f-m1"
unmount_view "$T/f-m1"
# the producer deletes what was consumed (every shard up to it)
consumed=$($PY -c 'import json,sys; print(json.load(open(sys.argv[1]))["consumed"])' \
	"$T/f-tmp/phase1.json")
expect_eq "phase 1 consumed a shard" "${consumed:+yes}" yes
for s in "$T"/f/chunk_*.jsonl; do
	[[ "$(basename "$s")" < "$consumed" || "$(basename "$s")" == "$consumed" ]] &&
		rm "$s"
done
expect_eq "the follow log kept for the restart" \
	"$(test -s "$T/f/.shardfs/follow.log" && echo yes)" yes
# 3 windows of 20 samples read: P = 60
mount_view "$T/f" "$T/f-m2" "$R,start=60" || bad "mount f2"
py restart2 "$T/f" "$T/f-tmp" 20 "world=2,workers=2,start=60" "$T/f-m2"
unmount_view "$T/f-m2"

section "h. a shard changed or deleted before it was consumed: EIO, never other bytes"
mkdir -p "$T/h"
printf 'a\nb\n' > "$T/h/c0.jsonl"
printf 'c\nd\n' > "$T/h/c1.jsonl"
printf 'e\nf\n' > "$T/h/c2.jsonl"
touch "$T/h/.shardfs-end"
mount_view "$T/h" "$T/h-m" "$FO,window=2" || bad "mount h"
expect_eq "h: three windows" "$(ls "$T/h-m/0/0" | tr '\n' ' ')" \
	"stream.jsonl window-00000000.jsonl window-00000001.jsonl window-00000002.jsonl "
printf 'a\n' > "$T/h/c0.jsonl"
rm "$T/h/c1.jsonl"
expect_eq "h: a truncated shard's window: EIO" \
	"$(cat "$T/h-m/0/0/window-00000000.jsonl" 2>&1 >/dev/null)" \
	"cat: $T/h-m/0/0/window-00000000.jsonl: Input/output error"
expect_eq "h: a deleted shard's window: EIO" \
	"$(cat "$T/h-m/0/0/window-00000001.jsonl" 2>&1 >/dev/null)" \
	"cat: $T/h-m/0/0/window-00000001.jsonl: Input/output error"
expect_eq "h: the stream stops at the first of them with EIO" \
	"$(cat "$T/h-m/0/0/stream.jsonl" 2>&1)" \
	"cat: $T/h-m/0/0/stream.jsonl: Input/output error"
expect_eq "h: the untouched shard's window is served" \
	"$(cat "$T/h-m/0/0/window-00000002.jsonl")" "e
f"
expect_eq "h: the log says which shard and what, once each" \
	"$(log_count "$T/h-m" "$T/h/c0.jsonl: changed or truncated before every reader read it (it entered the stream with 4 bytes): EIO for its bytes") $(log_count "$T/h-m" "$T/h/c1.jsonl: deleted before every reader read it")" \
	"1 1"
expect_eq "h: nothing consumed" "$(cat "$T/h-m/.shardfs/consumed")" ""
# a source at a path of ~1 000 characters: each line whole, one a shard
long=$T/h-long/$(printf 'd%.0s' $(seq 240))/$(printf 'e%.0s' $(seq 240))/$(printf 'f%.0s' $(seq 240))/$(printf 'g%.0s' $(seq 200))
mkdir -p "$long"
printf 'a\nb\n' > "$long/c0.jsonl"
printf 'c\nd\n' > "$long/c1.jsonl"
touch "$long/.shardfs-end"
mount_view "$long" "$T/hl-m" "$FO,window=2" || bad "mount h-long"
rm "$long/c0.jsonl" "$long/c1.jsonl"
cat "$T/hl-m/0/0/window-00000000.jsonl" "$T/hl-m/0/0/window-00000001.jsonl" \
	>/dev/null 2>&1
expect_eq "h: a source's path of ${#long} characters: each shard's line whole, once" \
	"$(log_count "$T/hl-m" "$long/c0.jsonl: deleted before every reader read it (it entered the stream with 4 bytes): EIO for its bytes; a shard must not change or go before it is consumed (docs/follow.md)") $(log_count "$T/hl-m" "$long/c1.jsonl: deleted before every reader read it (it entered the stream with 4 bytes): EIO for its bytes; a shard must not change or go before it is consumed (docs/follow.md)")" \
	"1 1"
unmount_view "$T/hl-m"

H=$T/h-m/0/0
expect_eq "h: rename, link, symlink, mkdir, create answer EROFS, as on every mount" \
	"$(mv "$H/stream.jsonl" "$H/s" 2>&1; ln "$H/stream.jsonl" "$H/l" 2>&1
	ln -s x "$H/y" 2>&1; mkdir "$H/d" 2>&1; touch "$H/n" 2>&1)" \
	"mv: cannot move '$H/stream.jsonl' to '$H/s': Read-only file system
ln: failed to create hard link '$H/l': Read-only file system
ln: failed to create symbolic link '$H/y': Read-only file system
mkdir: cannot create directory ‘$H/d’: Read-only file system
touch: cannot touch '$H/n': Read-only file system"
expect_eq "h: shardfs.Mount reads the status (the schema of every mount, with its follow section) and lists the windows" \
	"$(PYTHONPATH=$TESTS/../python $PY -c '
import sys, shardfs
m = shardfs.Mount(sys.argv[1])
print(m.world, m.workers, m.per_reader, m.ranks,
      " ".join(p.name for p in m.files(0, 0)),
      m.status["follow"]["windows"], m.status["index_summary"]["shards"],
      m.status["plan"]["readers"][0]["files"],
      m.status["counters"]["errors"] > 0)' "$T/h-m")" \
	"1 1 2 [0] window-00000000.jsonl window-00000001.jsonl window-00000002.jsonl 3 3 3 True"
expect_eq "h: the control files, with the inode numbers of every mount's (status 5)" \
	"$(cd "$T/h-m/.shardfs" && stat -c '%n %i' *)" "ack 7
consumed 6
status 5"
unmount_view "$T/h-m"

section "k. windows consumed and deleted are no longer listed"
mkdir -p "$T/k"
for c in 0 1 2; do printf 'a%s\nb%s\n' $c $c > "$T/k/c$c.jsonl"; done
touch "$T/k/.shardfs-end"
mount_view "$T/k" "$T/k-m" "$FO,window=2" || bad "mount k"
K=$T/k-m/0/0
expect_eq "k: three windows" "$(ls "$K" | tr '\n' ' ')" \
	"stream.jsonl window-00000000.jsonl window-00000001.jsonl window-00000002.jsonl "
expect_eq "k: the stream read" "$(cat "$K/stream.jsonl" | wc -l)" 6
exec {kfd}<"$K/window-00000000.jsonl"
echo "0 0 1" > "$T/k-m/.shardfs/ack"
expect_eq "k: c1 consumed" "$(cat "$T/k-m/.shardfs/consumed")" "c1.jsonl"
expect_eq "k: consumed but still in the source: still listed" \
	"$(ls "$K" | tr '\n' ' ')" \
	"stream.jsonl window-00000000.jsonl window-00000001.jsonl window-00000002.jsonl "
# k_ls WANT: the listing of $K once it is WANT (the watcher's next turn),
# or as it is after 10 s
k_ls() {
	local i l
	for i in $(seq 100); do
		l=$(ls "$K" | tr '\n' ' ')
		[ "$l" = "$1" ] && break
		sleep 0.1
	done
	printf '%s' "$l"
}
rm "$T/k/c0.jsonl"
want="stream.jsonl window-00000001.jsonl window-00000002.jsonl "
expect_eq "k: window 0's shard deleted, window 1's not yet: window 0 goes" \
	"$(k_ls "$want")" "$want"
rm "$T/k/c1.jsonl"
want="stream.jsonl window-00000002.jsonl "
expect_eq "k: both consumed and deleted: only window 2 and the stream" \
	"$(k_ls "$want")" "$want"
# (a read or a read-ahead under way when they went closes them as it ends)
for i in $(seq 50); do
	held=$(ls -l "/proc/${daemon_pid[$T/k-m]}/fd" | grep -c '(deleted)')
	[ "$held" -eq 0 ] && break
	sleep 0.1
done
expect_eq "k: the daemon holds no descriptor of them (their space is freed)" \
	"$held" 0
expect_eq "k: their names: ENOENT" \
	"$(cat "$K/window-00000000.jsonl" 2>&1; stat -c %s "$K/window-00000001.jsonl" 2>&1)" \
	"cat: $K/window-00000000.jsonl: No such file or directory
stat: cannot statx '$K/window-00000001.jsonl': No such file or directory"
expect_eq "k: a reader that held one open: ESTALE (its bytes are gone)" \
	"$(cat <&$kfd 2>&1)" "cat: -: Stale file handle"
exec {kfd}<&-
expect_eq "k: window 2 read" "$(cat "$K/window-00000002.jsonl")" "a2
b2"
unmount_view "$T/k-m"

section "i. shardfs-check view audits the windows of two daemons"
mkdir -p "$T/i"
for c in 0 1 2; do
	for l in 0 1 2 3 4 5 6; do printf '{"c":%d,"l":%d}\n' "$c" "$l"; done \
		> "$T/i/chunk_0000$c.jsonl"
done
touch "$T/i/.shardfs-end"
I="$FO,format=jsonl,window=8,world=2,workers=2"
mount_view "$T/i" "$T/i0" "$I,rank=0" || bad "mount i0"
mount_view "$T/i" "$T/i1" "$I,rank=1" || bad "mount i1"
expect_eq "i: both mounts audited together pass" \
	"$(shardfs-check view "$T/i0" "$T/i1"; echo "exit $?")" \
	"view: 4 of 4 readers, 6 samples each (21 remaining, 3 padded, 0 dropped)
PASS: disjoint, nothing missing, equal counts, every sample's bytes and order as planned
exit 0"
expect_eq "i: one mount alone misses a rank" \
	"$(shardfs-check view "$T/i0" | tail -2; echo "exit ${PIPESTATUS[0]}")" \
	"FAIL: 1 finding: 1 coverage
  coverage: rank 1 is shown by no mount
exit 1"
unmount_view "$T/i0"
unmount_view "$T/i1"

section "j. shardfs-check view finds a window whose bytes are not the plan's"
mkdir -p "$T/j"
printf '{"i":0}\n{"i":1}\n{"i":2}\n{"i":3}\n{"i":4}\n{"i":5}\n' > "$T/j/c0.jsonl"
printf '{"i":6}\n{"i":7}\n{"i":8}\n{"i":9}\n{"i":10}\n' > "$T/j/c1.jsonl"
touch "$T/j/.shardfs-end"
mount_view "$T/j" "$T/j-m" "$FO,window=4,workers=2" || bad "mount j"
# same size, same mtime, same number of lines: the daemon's boundaries
# (scanned at mount) no longer fall between c0's lines 3 and 4
printf '{"i":0}\n{"i":1}\n{"i":2}\n{"i": 3}\n{"":4}\n{"i":5}\n' > "$T/j/new"
touch -r "$T/j/c0.jsonl" "$T/j/new"
cat "$T/j/new" > "$T/j/c0.jsonl"
touch -r "$T/j/new" "$T/j/c0.jsonl"
expect_eq "j: the auditor names the windows, the readers and the samples" \
	"$(shardfs-check view "$T/j-m"; echo "exit $?")" \
	"view: 2 of 2 readers, 6 samples each (11 remaining, 1 padded, 0 dropped)
FAIL: 4 findings: 1 count 3 bytes
  count: window 1: rank 0 worker 0 ($T/j-m) read 3 samples, the plan gives every reader 2
  bytes: window 1: rank 0 worker 0 ($T/j-m), window-00000001.jsonl, sample 0: read bytes that are no sample of window 1, the plan says c0.jsonl:4
  bytes: window 1: rank 0 worker 0 ($T/j-m), window-00000001.jsonl, sample 1: read c0.jsonl:4, the plan says c0.jsonl:5
  bytes: window 1: rank 0 worker 0 ($T/j-m), window-00000001.jsonl, sample 2: read c0.jsonl:5, the plan says no sample
exit 1"
unmount_view "$T/j-m"

section "g. a PyTorch DDP job over a growing source"
mkdir -p "$T/g" "$T/g-out"
G="$FO,format=jsonl,window=32,world=2,workers=2,batch=4"
mount_view "$T/g" "$T/g0" "$G,rank=0" || bad "mount g0"
mount_view "$T/g" "$T/g1" "$G,rank=1" || bad "mount g1"
py ddp "$T/g" "$T/g-out" 32 4 "$T/g0" "$T/g1"
unmount_view "$T/g0"
unmount_view "$T/g1"

expect_eq "nothing of this test left mounted" \
	"$(awk -v t="$T" 'index($2, t) == 1' /proc/mounts | wc -l)" 0
finish
