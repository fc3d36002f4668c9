#!/usr/bin/env bash
# The loader benchmark, results in docs/benchmarks.md ("A training job").
# Usage: tests/bench/bench_ddp.sh [RUNS] [KIB]   (as root: it mounts)
#
# The DDP job of tests/python/e2e/ddp.py (world=2 ranks x workers=2 DataLoader
# workers, batch 32, gloo, a linear model: the loader is the bottleneck)
# for one epoch over 32 tar shards of 4 MiB / KIB samples of KIB KiB each
# (default 16: 256 samples a shard, 128 MiB in all; warm page cache),
# four ways in one run:
#   source    ranks read SRC sharded in Python: shards[rank::world], then
#             [worker::workers] -- the baseline
#   links     shardfs, one mount per rank, whole shards (symlinks)
#   slices    shardfs with block = a quarter shard: every file a spliced
#             slice
#   interleaved  shardfs with partition=interleaved: one file per batch
#             of 32 samples (a slice; with 256 KiB samples a batch is two
#             whole shards, so a symlink)
# Rate = samples of the epoch / the slowest rank's epoch time (the job's
# pace); each figure is the median of RUNS (default 3), ratios against the
# baseline.
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
. "$top/tests/bench/lib.sh"
runs=${1:-3}
kib=${2:-16}
per_shard=$((4096 / kib))
bin=$top/build
PY=/usr/bin/python3
cmake -S "$top" -B "$bin" >/dev/null && cmake --build "$bin" -j "$(nproc)" >/dev/null
src=$(ddp_shards "$kib")
work=$(mktemp -d /tmp/shardfs-bench-ddp-XXXXXX)
mnts=()
cleanup() {
	local m
	for m in "${mnts[@]}"; do
		if mountpoint -q "$m"; then fusermount3 -u "$m"; fi
	done
	rm -rf --one-file-system "$work"
}
trap cleanup EXIT
cat "$src"/*.tar > /dev/null

# rate OUT: samples per second of the epoch in OUT's rank logs
rate() {
	$PY - "$1" <<'PY'
import glob, json, sys
logs = [json.load(open(p))["0"] for p in glob.glob(sys.argv[1] + "/rank-*.json")]
n = sum(len(b) for log in logs for b in log["batches"])
print(n / max(log["seconds"] for log in logs))
PY
}
job() { # job NAME ARGS...
	rm -rf "$work/$1"
	$PY "$top/tests/python/e2e/ddp.py" --world 2 --workers 2 --batch 32 --epochs 0 --out "$work/$1" "${@:2}" >/dev/null
	rate "$work/$1"
}
mount_ranks() { # mount_ranks NAME OPTIONS: one mount per rank, in $list
	local r
	list=
	for r in 0 1; do
		mkdir -p "$work/$1-$r"
		mnts+=("$work/$1-$r")
		"$bin/shardfs" "$src" "$work/$1-$r" -o "rank=$r,world=2,workers=2,batch=32,$2"
		list=${list:+$list,}$work/$1-$r
	done
}

mount_ranks links "epoch=0"
links=$list
mount_ranks slices "epoch=0,block=$((per_shard / 4))"
slices=$list
mount_ranks interleaved "epoch=0,partition=interleaved"
interleaved=$list
for r in $(seq "$runs"); do
	echo "source $(job source --source "$src")"
	echo "links $(job links --mounts "$links")"
	echo "slices $(job slices --mounts "$slices")"
	echo "interleaved $(job interleaved --mounts "$interleaved")"
done > "$work/rates"
awk '{r[$1] = r[$1] sprintf(" %.0f", $2)} END {for (k in r) print "runs " k ":" r[k]}' "$work/rates" | sort
files=$(find "$work/slices-0/0" -type f | wc -l)
s=$(awk '$1 == "source" {print $2}' "$work/rates" | median)
l=$(awk '$1 == "links" {print $2}' "$work/rates" | median)
c=$(awk '$1 == "slices" {print $2}' "$work/rates" | median)
i=$(awk '$1 == "interleaved" {print $2}' "$work/rates" | median)
ifiles=$(find "$work/interleaved-0/0" -type f | wc -l)
awk -v s="$s" -v l="$l" -v c="$c" -v runs="$runs" -v files="$files" -v i="$i" -v ifiles="$ifiles" -v n=$((32 * per_shard)) -v kib="$kib" 'BEGIN {
	printf "DDP world=2 x workers=2, batch 32, %d samples of %d KiB, median of %d\n", n, kib, runs
	printf "source, shards[rank::world] in Python: %6.0f samples/s\n", s
	printf "shardfs, whole shards (symlinks):      %6.0f samples/s  %.2f of source\n", l, l / s
	printf "shardfs, quarter-shard slices (%d on rank 0): %6.0f samples/s  %.2f of source\n", files, c, c / s
	printf "shardfs, interleaved batches (%d slices on rank 0): %6.0f samples/s  %.2f of source\n", ifiles, i, i / s }'
