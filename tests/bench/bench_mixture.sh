#!/usr/bin/env bash
# Mixtures (issue 14), results in docs/benchmarks.md: a 10-source mixture
# of SAMPLES samples in all (default 10 000 000, uneven sources) against a
# single source of the same samples and shards:
#   - the plan of every reader (world=64 x workers=8): time and heap, with
#     shuffle=units and shuffle=samples, random and stratified batching
#   - the daemon for rank 0: mount to ready and epoch switch
# Usage: tests/bench/bench_mixture.sh [SAMPLES [RUNS]]   (as root: it mounts)
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
. "$top/tests/bench/lib.sh"
need /usr/bin/time python3
total=${1:-10000000}
runs=${2:-5}
bin=$top/build
cmake -S "$top" -B "$bin" >/dev/null && cmake --build "$bin" -j "$(nproc)" >/dev/null
B=${BENCH_DIR:-/tmp/shardfs-bench}/mixture-$total
mkdir -p "$B"

# ten sources of 1..19 parts of total/100 samples (sizes 1:3:...:19), in
# shards of 1000 samples; the single source holds the same shards
per=$((total / 100))
if [ ! -f "$B/single/.shardfs/manifest.json" ]; then
	echo "generating $total samples in $B"
	mkdir -p "$B/single"
	for s in $(seq 0 9); do
		n=$(((2 * s + 1) * per))
		"$bin/shardfs-mkdata" "$B/src$s" --format jsonl --shards $((n / 1000)) \
			--samples 1000 --size 8 --seed "$s" >/dev/null
		"$bin/shardfs-index" "$B/src$s" --no-hash --quiet
		for f in "$B/src$s"/*.jsonl; do ln "$f" "$B/single/src$s-$(basename "$f")"; done
	done
	"$bin/shardfs-index" "$B/single" --no-hash --quiet
fi
python3 - "$B" > "$B/mix.json" <<'EOF'
import json, sys
print(json.dumps({"sources": [{"path": "src%d" % s, "proportion": 10 - s}
                              for s in range(10)]}))
EOF
sed 's/}]}$/}], "batching": "stratified"}/' "$B/mix.json" > "$B/strat.json"

echo "== plan of 64 x 8 readers"
for shuffle in units samples; do
	"$bin/tests/bench_plan" "$B/single" - 64 8 "$shuffle" 1000 | tail -1 | sed 's/^/single:     /'
	"$bin/tests/bench_plan" "$B/mix.json" - 64 8 "$shuffle" 1000 | tail -1 | sed 's/^/mixture:    /'
done
"$bin/tests/bench_plan" "$B/strat.json" - 64 8 units 1000 | tail -1 | sed 's/^/stratified: /'
peak() { /usr/bin/time -f %M "$@" 2>&1 >/dev/null | tail -1; }
echo "peak RSS of shardfs-plan (64 x 8, block=1000): single $(peak "$bin/shardfs-plan" "$B/single" -o world=64,workers=8,block=1000) KB," \
	"mixture $(peak "$bin/shardfs-plan" "$B/mix.json" -o world=64,workers=8,block=1000) KB," \
	"stratified $(peak "$bin/shardfs-plan" "$B/strat.json" -o world=64,workers=8,block=1000) KB"

m=$B/mnt
cleanup() { mountpoint -q "$m" && fusermount3 -u "$m"; return 0; }
trap cleanup EXIT
mkdir -p "$m"
mnt() { "$bin/shardfs" "$1" "$m" -o "rank=0,world=64,workers=8,block=1000$2"; }
switch_to() { echo "$1" > "$m/.shardfs/epoch"; }
echo
echo "== the daemon for rank 0 of 64 x 8"
for src in single mix.json; do
	ready=$(for r in $(seq "$runs"); do timed mnt "$B/$src" ""; fusermount3 -u "$m"; done | median)
	mnt "$B/$src" ""
	sw=$(for e in $(seq "$runs"); do timed switch_to "$e"; done | median)
	rss=$(awk '/VmHWM/ {print $2}' "/proc/$(pgrep -n -f "shardfs $B/$src $m")/status")
	fusermount3 -u "$m"
	echo "$src: mount to ready ${ready}s, epoch switch ${sw}s, daemon peak RSS ${rss} KB"
done
