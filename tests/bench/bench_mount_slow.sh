#!/usr/bin/env bash
# Mount to ready over a slow source (docs/benchmarks.md, "Mount to ready
# and the daemon's memory"): a view (rank 0 of world=2 x workers=2) of
# SHARDS [1000] JSONL shards of 10 samples, indexed on the local disk and
# mounted over slowfs (tests/bench/slowfs.c) answering every request after
# LATENCY ms [5], with no entry or attribute cached (timeout=0), as a
# network file system or an object store's adapter that asks its server
# at every lookup.  At mount the daemon checks every shard against the
# index: a round trip or more each.  The median of ROUNDS [5] mounts; with
# BASE=DIR (another build tree) the same of its shardfs, alternated, and
# the ratio.
# Usage: [BASE=DIR] tests/bench/bench_mount_slow.sh [SHARDS [LATENCY [ROUNDS]]]
# (as root: it mounts)
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
. "$top/tests/bench/lib.sh"
shards=${1:-$(bench_size 1000 20)}
latency=${2:-$(bench_size 5 1)}
rounds=${3:-$(bench_size 5 1)}
bin=$top/build
cmake -S "$top" -B "$bin" >/dev/null && cmake --build "$bin" -j "$(nproc)" >/dev/null
B=${BENCH_DIR:-/tmp/shardfs-bench}/mount-slow-$shards
if [ ! -f "$B/src/.shardfs/manifest.json" ]; then
	rm -rf "$B"
	mkdir -p "$B"
	"$bin/shardfs-mkdata" "$B/src" --format jsonl --shards "$shards" \
		--samples 10 --size 8 --seed 1 >/dev/null
	"$bin/shardfs-index" "$B/src" --quiet
fi
slow=$B/slow m=$B/mnt
cleanup() {
	mountpoint -q "$m" && fusermount3 -u "$m"
	mountpoint -q "$slow" && fusermount3 -u "$slow"
	return 0
}
trap cleanup EXIT
mkdir -p "$slow" "$m"
"$bin/tests/slowfs" "$B/src" "$slow" -o "latency=$latency,timeout=0,stats=$B/slowfs.stats"
for i in $(seq 100); do mountpoint -q "$slow" && break; sleep 0.05; done
mountpoint -q "$slow" || { echo "slowfs did not mount $slow" >&2; exit 1; }

builds=("$bin")
[ -n "${BASE:-}" ] && builds+=("$BASE")
out=$B/rounds.txt
: > "$out"
for r in $(seq "$rounds"); do
	for b in "${builds[@]}"; do
		echo "$b $(timed "$b/shardfs" "$slow" "$m" -o rank=0,world=2,workers=2)" >> "$out"
		fusermount3 -u "$m"
	done
done
col() { awk -v b="$1" '$1 == b {print $2}' "$out" | median; }
line="$shards shards, $latency ms a request: mount to ready $(col "$bin")s"
[ -n "${BASE:-}" ] &&
	line="$line; base $(col "$BASE")s; ratio $(ratio "$(col "$bin")" "$(col "$BASE")")"
echo "$line (median of $rounds)"
