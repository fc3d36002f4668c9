#!/usr/bin/env bash
# The indexing benchmark, results in docs/benchmarks.md ("Indexing"):
#   - shardfs-index --no-hash against bsdtar -tf over the same files
#   - shardfs-index (hashing) against sha256sum over the same files
#   - one epoch's plan for world=64 x workers=8, and index memory
# on a generated tar dataset (default 10 000 shards x 100 samples);
#   - the peak memory of indexing one JSONL shard of LINES short lines
#     (BENCH_JSONL_LINES, default 100 000 000: 1.5 GB of scratch), with
#     --no-hash and with digests: a shard's boundaries and digests go to
#     the spill as its scan finds them, so memory must not grow with them.
# Usage: tests/bench/bench_index.sh [SHARDS] [SAMPLES] [RUNS]
# Everything runs warm (page cache), each figure the median of RUNS runs.
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
. "$top/tests/bench/lib.sh"
need /usr/bin/time
shards=${1:-10000}
samples=${2:-100}
runs=${3:-5}
bin=$top/build
jobs=$(nproc)
cmake -S "$top" -B "$bin" >/dev/null && cmake --build "$bin" -j "$jobs" >/dev/null
data=${BENCH_DIR:-/tmp/shardfs-bench}/tar-$shards-$samples
mkdir -p "$(dirname "$data")"
if [ ! -d "$data" ]; then
	echo "generating $shards shards x $samples samples in $data"
	"$bin/shardfs-mkdata" "$data" --shards "$shards" --samples "$samples" --size 16-400 --seed 1
fi
(cd "$data" && ls shard-*.tar) > "$data.list"
du -sh --apparent-size "$data" | awk '{print "dataset: " $1}'

# time_cmd CMD...: median wall seconds over $runs runs, after one warm-up
time_cmd() {
	local i
	"$@" >/dev/null 2>&1
	for i in $(seq "$runs"); do
		timed "$@" 2>/dev/null
	done | median | awk '{printf "%.3f\n", $1}'
}

cd "$data"
echo
echo "== scanning headers ($jobs jobs each)"
# a fresh index every run: no reuse of the previous one
a=$(time_cmd sh -c "rm -rf '$data.idx-nohash' && '$bin/shardfs-index' '$data' --no-hash --jobs $jobs --out '$data.idx-nohash' --quiet")
b=$(time_cmd sh -c "xargs -P $jobs -n 1 bsdtar -tf < '$data.list'")
c=$(time_cmd sh -c "xargs -P $jobs -n 1 true < '$data.list'")
echo "shardfs-index --no-hash: ${a}s   bsdtar -tf (one process per shard): ${b}s   speed-up $(ratio "$b" "$a")x"
echo "(of which process start-up alone, xargs -n1 true: ${c}s)"

echo
echo "== hashing ($jobs jobs each)"
a=$(time_cmd sh -c "rm -rf '$data.idx-hash' && '$bin/shardfs-index' '$data' --jobs $jobs --out '$data.idx-hash' --quiet")
b=$(time_cmd sh -c "xargs -P $jobs -n 500 sha256sum < '$data.list'")
echo "shardfs-index (scan + SHA-256): ${a}s   sha256sum: ${b}s   ratio $(ratio "$a" "$b") (1.00 = as fast)"

echo
echo "== refresh with nothing changed"
a=$(time_cmd "$bin/shardfs-index" "$data" --jobs "$jobs" --out "$data.idx-hash" --quiet)
echo "shardfs-index re-run: ${a}s"

echo
echo "== plan"
"$bin/tests/bench_plan" "$data" "$data.idx-hash" 64 8 units
"$bin/tests/bench_plan" "$data" "$data.idx-hash" 64 8 samples | tail -1

echo
lines=${BENCH_JSONL_LINES:-$(bench_size 100000000 100000)}
echo "== one JSONL shard of $lines lines"
jl=${BENCH_DIR:-/tmp/shardfs-bench}/jsonl-$lines
if [ ! -f "$jl/.done" ]; then
	rm -rf "$jl"
	mkdir -p "$jl"
	awk -v n="$lines" 'BEGIN {for (i = 0; i < n; i++) printf "{\"i\":%d}\n", i}' > "$jl/big.jsonl"
	touch "$jl/.done"
fi
for h in --no-hash ""; do
	rm -rf "$jl.idx"
	/usr/bin/time -f "%e %M" -o "$jl.time" "$bin/shardfs-index" "$jl" $h --out "$jl.idx" --quiet
	read -r t peak < "$jl.time"
	echo "shardfs-index ${h:-(digests)}: ${t}s, peak RSS ${peak} KB"
done
rm -rf "$jl.idx" "$jl.time"
