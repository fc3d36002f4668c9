#!/usr/bin/env bash
# The file-system benchmark, results in docs/benchmarks.md ("Reading").
# Usage: tests/bench/bench_read.sh [RUNS [SECTIONS]]   (as root: it mounts and
# drops caches); SECTIONS is any of "warm cold meta" (default: all three).
#
# Reads ~2 GiB of tar shards with fio (psync, sequential, one job per
# reader) through: the source directly (native), a null-reply FUSE daemon
# (the transport ceiling), the symlink view, and spliced slices on first and
# second read; warm page cache, 1 and 4 readers, 128 KiB and 1 MiB
# requests.  Then cold (caches dropped): direct against spliced, with and
# without the plan-aware prefetch.  Then metadata at 10 000 shards: cached
# stat and readlink of view entries, `ls -l` of a 10 000-entry directory,
# mount-to-ready and epoch-switch time at 1 000 000 samples.
# Every figure is the median of RUNS (default 3) runs, printed with the
# ratio docs/benchmarks.md states an aim for, measured in the same run.
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
. "$top/tests/bench/lib.sh"
need fio python3
runs=${1:-3}
sections=${2:-warm cold meta}
want() { [[ " $sections " == *" $1 "* ]]; }
bin=$top/build
cmake -S "$top" -B "$bin" >/dev/null && cmake --build "$bin" -j "$(nproc)" >/dev/null
B=${BENCH_DIR:-/tmp/shardfs-bench}
src=$B/read-64
mkdir -p "$B"
if [ ! -d "$src" ]; then
	echo "generating 64 shards of ~33 MiB in $src"
	"$bin/shardfs-mkdata" "$src" --shards 64 --samples "$(bench_size 300 40)" \
		--size "$(bench_size 50000-60000 20000-30000)" --members 2 --seed 3
fi
[ -f "$src/.shardfs/manifest.json" ] || "$bin/shardfs-index" "$src" --no-hash --quiet
du -sh --apparent-size "$src" | awk '{print "dataset: " $1 " in 64 shards"}'

mnts=()
cleanup() {
	local m
	for m in "${mnts[@]}"; do mountpoint -q "$m" && fusermount3 -u "$m"; done
	return 0
}
trap cleanup EXIT
mnt() { mkdir -p "$2"; mnts+=("$2"); "$bin/shardfs" "$1" "$2" -o "$3"; }
umnt() { fusermount3 -u "$1"; }

# fio_gbps BS LIST...: one job per list file (files read in turn); GB/s
fio_gbps() {
	local bs=$1 i=0 job=$B/job.fio
	shift
	{
		printf '[global]\nrw=read\nioengine=psync\nbs=%s\ninvalidate=0\nfile_service_type=sequential\n' "$bs"
		for l in "$@"; do
			printf '[r%d]\nfilename=%s\n' "$i" "$(paste -sd: "$l")"
			i=$((i + 1))
		done
	} > "$job"
	fio --output-format=json "$job" | python3 -c '
import json, sys
j = json.load(sys.stdin)["jobs"]
print("%.3f" % (sum(x["read"]["io_bytes"] for x in j) /
                 max(1, max(x["read"]["runtime"] for x in j)) / 1e6))'
}

# the lists: reader i of 4 reads the same bytes through every path;
# slices of blk samples (two to a shard)
blk=$(bench_size 150 20)
link=$B/m-link slice=$B/m-slice null=$B/m-null
mnt "$src" "$link" world=1,workers=4,shuffle=none
mnt "$src" "$slice" world=1,workers=4,shuffle=none,block=$blk
for i in 0 1 2 3; do
	ls -d "$link/0/$i"/* > "$B/link-$i.list"
	xargs -n1 readlink < "$B/link-$i.list" > "$B/native-$i.list"
	ls -d "$slice/0/$i"/* > "$B/slice-$i.list"
done
nslices=$(cat "$B"/slice-?.list | wc -l)
bytes=$(cat "$B"/slice-?.list | xargs stat -c %s | awk '{s += $1} END {print s}')
per=$((bytes / nslices))
mkdir -p "$null"; mnts+=("$null")
"$bin/tests/nullfs" "$null" "$nslices" "$per"
# the same request sizes as shardfs: the read-ahead it set on its mount
# (its first request wrote it: the ls above)
cat "/sys/class/bdi/$(mountpoint -d "$slice")/read_ahead_kb" \
	> "/sys/class/bdi/$(mountpoint -d "$null")/read_ahead_kb"
for i in 0 1 2 3; do
	n=$(wc -l < "$B/slice-$i.list")
	seq $((i * n)) $((i * n + n - 1)) | sed "s|^|$null/f|" > "$B/null-$i.list"
done
umnt "$slice"

lists() { local k=$1 n=$2 i; for i in $(seq 0 $((n - 1))); do echo "$B/$k-$i.list"; done; }
cat "$B"/native-?.list | xargs cat > /dev/null # warm the source

if want warm; then
echo
echo "== warm page cache: GB/s (median of $runs)"
printf '%-8s %-4s %8s %8s %8s %8s %8s %8s   %s\n' readers bs native null link slice1 copy1 slice2 "link/native slice1/null slice2/native"
for n in 1 4; do
	for bs in 128k 1m; do
		nat=$(for r in $(seq "$runs"); do fio_gbps "$bs" $(lists native $n); done | median)
		nul=$(for r in $(seq "$runs"); do fio_gbps "$bs" $(lists null $n); done | median)
		lnk=$(for r in $(seq "$runs"); do fio_gbps "$bs" $(lists link $n); done | median)
		s1=$(for r in $(seq "$runs"); do
			mnt "$src" "$slice" world=1,workers=4,shuffle=none,block=$blk
			fio_gbps "$bs" $(lists slice $n)
			umnt "$slice"
		done | median)
		c1=$(for r in $(seq "$runs"); do
			mnt "$src" "$slice" world=1,workers=4,shuffle=none,block=$blk,splice=0
			fio_gbps "$bs" $(lists slice $n)
			umnt "$slice"
		done | median)
		mnt "$src" "$slice" world=1,workers=4,shuffle=none,block=$blk
		fio_gbps "$bs" $(lists slice $n) > /dev/null
		s2=$(for r in $(seq "$runs"); do fio_gbps "$bs" $(lists slice $n); done | median)
		umnt "$slice"
		printf '%-8s %-4s %8s %8s %8s %8s %8s %8s   %.2f %.2f %.2f\n' "$n" "$bs" "$nat" "$nul" "$lnk" "$s1" "$c1" "$s2" \
			"$(ratio "$lnk" "$nat")" "$(ratio "$s1" "$nul")" "$(ratio "$s2" "$nat")"
	done
done

fi

if want cold; then
echo
echo "== cold (echo 3 > drop_caches before each run): GB/s, 1 reader, 1m"
cold() {
	local r
	for r in $(seq "$runs"); do
		if [ -n "${2:-}" ]; then
			mnt "$src" "$slice" "world=1,workers=4,shuffle=none,block=$blk,prefetch=$2"
		fi
		sync
		echo 3 > /proc/sys/vm/drop_caches
		fio_gbps 1m "$1"
		if [ -n "${2:-}" ]; then umnt "$slice"; fi
	done | median
}
cn=$(cold "$B/native-0.list")
cp1=$(cold "$B/slice-0.list" 1)
cp0=$(cold "$B/slice-0.list" 0)
echo "direct $cn   spliced+prefetch $cp1 ($(ratio "$cp1" "$cn") of direct)   spliced, no prefetch $cp0 ($(ratio "$cp0" "$cn"))"
fi
umnt "$link"
umnt "$null"

if want meta; then
echo
echo "== metadata: a 10 000-entry worker directory (1 000 000 samples)"
big=$B/tar-10000-100
if [ ! -d "$big" ]; then
	"$bin/shardfs-mkdata" "$big" --shards "$(bench_size 10000 200)" --samples 100 --size 16-400 --seed 1
fi
[ -f "$big/.shardfs/manifest.json" ] || "$bin/shardfs-index" "$big" --no-hash --quiet
m=$B/m-big
ready=$(for r in $(seq 5); do
	timed mnt "$big" "$m" world=64,workers=8; umnt "$m"
done | median)
echo "mount to ready (world=64, workers=8, 10 000 shards, 1 000 000 samples): ${ready}s"
mnt "$big" "$m" world=64,workers=8
switch_to() { echo "$1" > "$m/.shardfs/epoch"; }
sw=$(for e in 1 2 3 4 5; do timed switch_to $e; done | median)
echo "epoch switch: ${sw}s"
umnt "$m"
mnt "$big" "$m" world=1,workers=1,shuffle=none
nat=$B/native-links
if [ ! -d "$nat" ]; then
	mkdir -p "$nat"
	for f in "$m"/0/0/*; do ln -s "$(readlink "$f")" "$nat/$(basename "$f")"; done
fi
lsl() { local r; for r in $(seq 5); do timed ls -l "$1"; done | median; }
umnt "$m"; mnt "$big" "$m" world=1,workers=1,shuffle=none
cold_ls=$(timed ls -l "$m/0/0")
lv=$(lsl "$m/0/0") ln=$(lsl "$nat")
echo "ls -l of 10 000 entries: view ${lv}s (first, cold: ${cold_ls}s), native symlinks ${ln}s, ratio $(ratio "$ln" "$lv") of native speed"
python3 - "$m/0/0" "$nat" <<'PY'
import os, sys, time
def rate(d, op):
    names = [os.path.join(d, n) for n in os.listdir(d)]
    best = []
    for _ in range(5):
        t = time.perf_counter()
        for p in names:
            op(p)
        best.append(len(names) / (time.perf_counter() - t))
    return sorted(best)[2]
for name, op in (("stat", os.lstat), ("readlink", os.readlink)):
    v, n = rate(sys.argv[1], op), rate(sys.argv[2], op)
    print("cached %s: view %.0f/s, native %.0f/s, ratio %.2f" % (name, v, n, v / n))
PY
umnt "$m"
fi
