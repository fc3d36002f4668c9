#!/usr/bin/env bash
# Prefetch on slow storage, results in docs/benchmarks.md.
# Usage: tests/bench/bench_slow.sh [RUNS [SECTIONS]]   (as root: it mounts
# and drops caches); SECTIONS is any of "files tar fast fastfiles"
# (default: all).
#
# The source is slowfs (tests/bench/slowfs.c) over a local directory:
# LATENCY ms per request (lookup, getattr, open, read), and for the tar
# shards a shared link of BW MB/s.  One reader's share (world=4, workers=2,
# rank 0, worker 0) is read file after file with a Python read loop, the way
# a loader does: directly from slowfs (the same files in the same order), and
# through a shardfs view of the slowfs mount with symlinks=1 and symlinks=0,
# each with prefetch=1 and prefetch=0.  Page cache dropped before every run
# (and slowfs and the view mounted afresh, so no open file or cached entry
# carries over); the median of RUNS (default 3) runs, with its ratio to
# direct from the same run set.  The fast cases read the same shares from
# the local disk, without slowfs.  First, slowfs itself is measured: the latency
# of a lookup and the bandwidth of one sequential read.
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
. "$top/tests/bench/lib.sh"
runs=${1:-3}
sections=${2:-files tar fast fastfiles}
want() { [[ " $sections " == *" $1 "* ]]; }
LATENCY=${LATENCY:-2}
BW=${BW:-200}
bin=$top/build
cmake -S "$top" -B "$bin" >/dev/null && cmake --build "$bin" -j "$(nproc)" >/dev/null
B=${BENCH_DIR:-/tmp/shardfs-slow}
mkdir -p "$B"
if [ ! -d "$B/files" ]; then
	echo "generating 2000 files of 90-110 KB in $B/files"
	"$bin/shardfs-mkdata" "$B/files" --format files --shards 8 --samples "$(bench_size 250 10)" \
		--size 90000-110000 --members 1 --seed 5
fi
[ -f "$B/files/.shardfs/manifest.json" ] || "$bin/shardfs-index" "$B/files" --format files --no-hash --quiet
if [ ! -d "$B/tar" ]; then
	echo "generating 32 tar shards of 64 MB in $B/tar"
	"$bin/shardfs-mkdata" "$B/tar" --shards "$(bench_size 32 8)" --samples "$(bench_size 64 4)" \
		--size 500000 --members 2 --seed 6
fi
[ -f "$B/tar/.shardfs/manifest.json" ] || "$bin/shardfs-index" "$B/tar" --no-hash --quiet

slow=$B/m-slow view=$B/m-view
mkdir -p "$slow" "$view"
cleanup() {
	local m
	for m in "$view" "$slow"; do
		if mountpoint -q "$m"; then fusermount3 -u "$m"; fi
	done
	return 0
}
trap cleanup EXIT
# bg MNT CMD...: run a FUSE daemon in the foreground, in the background,
# until MNT answers; umnt MNT unmounts it and waits for the daemon to exit
# (it holds files of the mount below it until then)
declare -A pid
bg() {
	local m=$1 i
	shift
	"$@" -f &
	pid[$m]=$!
	for i in $(seq 200); do
		mountpoint -q "$m" && return 0
		sleep 0.05
	done
	echo "bench_slow: $* did not mount $m" >&2
	return 1
}
umnt() { fusermount3 -u "$1"; wait "${pid[$1]}"; }
# slow_mount DIR [BW]: slowfs over DIR on $slow
slow_mount() {
	bg "$slow" "$bin/tests/slowfs" "$1" "$slow" -o "latency=$LATENCY,bw=${2:-0},stats=$B/slowfs.stats"
}
# view_mount SRC OPTS: a view of SRC on $view
view_mount() { bg "$view" "$bin/shardfs" "$1" "$view" -o "$O,$2" 2>>"$B/shardfs.log"; }
drop() { sync; echo 3 > /proc/sys/vm/drop_caches; }
O=world=4,workers=2,rank=0,shuffle=units,seed=1

# read_all LIST: seconds to read every file of LIST in order, whole
read_all() {
	python3 - "$1" <<'PY'
import sys, time
paths = open(sys.argv[1]).read().split("\n")[:-1]
t = time.perf_counter()
n = 0
for p in paths:
    with open(p, "rb") as f:
        n += len(f.read())
print("%.3f" % (time.perf_counter() - t))
PY
}

# share SRC LIST: reader 0/0's files of a view of SRC in plan order, one
# path per line (relative to the view's mount), and their targets
share() {
	view_mount "$1" symlinks=1
	(cd "$view/0/0" && find . -type l | sed 's|^\./||' |
		awk -F/ '{print $NF "\t" $0}' | sort | cut -f2) > "$2"
	(cd "$view/0/0" && xargs -d '\n' readlink < "$2") > "$2.direct"
	umnt "$view"
}

# measure SRC BW LIST OPTS: median seconds of RUNS reads of LIST, slowfs
# (with BW) over SRC when BW is not "-", a view with OPTS when OPTS is set
measure() {
	local src=$1 bw=$2 list=$3 opts=${4:-} r dir
	for r in $(seq "$runs"); do
		dir=$src
		if [ "$bw" != - ]; then
			slow_mount "$src" "$bw"
			dir=$slow
		fi
		if [ -n "$opts" ]; then
			view_mount "$dir" "$opts"
			sed "s|^|$view/0/0/|" "$list" > "$list.run"
		else
			sed "s|^$src|$dir|" "$list.direct" > "$list.run"
		fi
		drop
		read_all "$list.run"
		if [ -n "$opts" ]; then
			case $opts in
			*prefetch=1*) cat "$view/.shardfs/status" > "$B/status.last" ;;
			esac
			umnt "$view"
		fi
		if [ "$bw" != - ]; then umnt "$slow"; fi
	done | median
}

# compare KEY TITLE SRC BW: direct against the four views
compare() {
	local title=$2 src=$3 bw=$4 list=$B/$1.list d l1 l0 f1 f0 bytes
	share "$src" "$list"
	bytes=$(xargs -d '\n' stat -L -c %s < "$list.direct" | awk '{s += $1} END {print s}')
	d=$(measure "$src" "$bw" "$list")
	l1=$(measure "$src" "$bw" "$list" symlinks=1,prefetch=1)
	l0=$(measure "$src" "$bw" "$list" symlinks=1,prefetch=0)
	f1=$(measure "$src" "$bw" "$list" symlinks=0,prefetch=1)
	f0=$(measure "$src" "$bw" "$list" symlinks=0,prefetch=0)
	echo "$title: $(wc -l < "$list") files, $((bytes / 1000000)) MB; seconds (median of $runs), and speed-up over direct"
	printf '  %-34s %7s\n' direct "$d"
	printf '  %-34s %7s  %sx\n' "view, symlinks=1, prefetch=1" "$l1" "$(ratio "$d" "$l1")" \
		"view, symlinks=1, prefetch=0" "$l0" "$(ratio "$d" "$l0")" \
		"view, symlinks=0, prefetch=1" "$f1" "$(ratio "$d" "$f1")" \
		"view, symlinks=0, prefetch=0" "$f0" "$(ratio "$d" "$f0")"
	python3 -c 'import json,sys; c = json.load(open(sys.argv[1]))["counters"]; print("  last view with prefetch=1: prefetched %d files, %d bytes, %d errors" % (c["prefetch_files"], c["prefetch_bytes"], c["prefetch_errors"]))' "$B/status.last"
}

echo "slowfs: latency=$LATENCY ms, bw=$BW MB/s"
slow_mount "$B/tar" "$BW"
drop
python3 - "$slow" <<'PY'
import os, sys, time
d = sys.argv[1]
t = time.perf_counter()
for i in range(200):
    try:
        os.stat(os.path.join(d, "absent-%d" % i))
    except FileNotFoundError:
        pass
print("  measured: lookup %.2f ms" % ((time.perf_counter() - t) / 200 * 1e3))
t = time.perf_counter()
with open(os.path.join(d, "shard-000000.tar"), "rb") as f:
    n = 0
    while True:
        b = f.read(1 << 20)
        if not b:
            break
        n += len(b)
s = time.perf_counter() - t
print("  measured: one sequential reader %.0f MB/s (%d MB in %.2f s)" % (n / s / 1e6, n // 1000000, s))
import threading
def read(p, out):
    with open(p, "rb") as f:
        while True:
            b = f.read(1 << 20)
            if not b:
                break
            out.append(len(b))
got = []
names = ["shard-%06d.tar" % i for i in range(1, 9)]
threads = [threading.Thread(target=read, args=(os.path.join(d, n), got)) for n in names]
t = time.perf_counter()
for th in threads:
    th.start()
for th in threads:
    th.join()
s = time.perf_counter() - t
print("  measured: 8 readers at once %.0f MB/s (%d MB in %.2f s)" % (sum(got) / s / 1e6, sum(got) // 1000000, s))
PY
umnt "$slow"
sed 's/^/  slowfs: /' "$B/slowfs.stats"

if want files; then
	echo
	compare files "files (latency $LATENCY ms)" "$B/files" 0
fi
if want tar; then
	echo
	compare tar "tar (latency $LATENCY ms, $BW MB/s)" "$B/tar" "$BW"
fi
if want fast; then
	echo
	compare fast "tar, local disk (no slowfs)" "$B/tar" -
fi
if want fastfiles; then
	echo
	compare fastfiles "files, local disk (no slowfs)" "$B/files" -
fi
