#!/usr/bin/env bash
# Mixtures, results in docs/benchmarks.md ("Mixtures"): a 10-source mixture
# of SAMPLES samples in all (default 10 000 000, uneven sources) against a
# single source of the same samples and shards:
#   - the plan of every reader (world=64 x workers=8): time and heap, with
#     shuffle=units and shuffle=samples, random and stratified batching
#   - the daemon for rank 0: mount to ready, epoch switch and peak RSS (of
#     the start, which loads the index and builds the first view before
#     the daemon forks, and of the daemon after the switches), for the
#     single source, random and stratified batching
# Usage: [BIN=BUILD] tests/bench/bench_mixture.sh [SAMPLES [RUNS]]   (as root:
# it mounts; BIN: the build directory, default build/)
# OLD=DIR also times the daemon of another build (DIR/shardfs, e.g. a
# Release build of the commit before), alternating old and new run by run.
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
. "$top/tests/bench/lib.sh"
need /usr/bin/time python3
total=${1:-10000000}
runs=${2:-5}
bin=${BIN:-$top/build}
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
		# (one process for all links: an ln each took 8 minutes at 100 M)
		python3 -c 'import glob, os, sys
for f in glob.glob(sys.argv[1] + "/*.jsonl"):
    os.link(f, "%s/%s-%s" % (sys.argv[2], sys.argv[3], os.path.basename(f)))' \
			"$B/src$s" "$B/single" "src$s"
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
# the index is loaded and the first view built before the daemon forks:
# the peak of that, the process shardfs started as, is /usr/bin/time's
mnt() {
	/usr/bin/time -f %M -o "$B/start-peak" \
		"$1/shardfs" "$2" "$m" -o "rank=0,world=64,workers=8,block=1000"
}
switch_to() { echo "$1" > "$m/.shardfs/epoch"; }
# one run of the daemon in build $1 on $2: mount to ready, the median of
# RUNS epoch switches, the peak RSS of the start (load, first view) and
# of the daemon after the switches (its VmHWM: from the fork on)
daemon_run() {
	local ready sw rss
	ready=$(timed mnt "$1" "$2")
	sw=$(for e in $(seq "$runs"); do timed switch_to "$e"; done | median)
	rss=$(awk '/VmHWM/ {print $2}' "/proc/$(pgrep -n -f "shardfs $2 $m")/status")
	fusermount3 -u "$m"
	echo "$ready $sw $(tail -1 "$B/start-peak") $rss"
}
echo
echo "== the daemon for rank 0 of 64 x 8 (medians of $runs runs: ready s, switch s, peak RSS KB of the start and of the daemon)"
builds=$bin
[ -n "${OLD:-}" ] && builds="$OLD $bin"
for src in single mix.json strat.json; do
	for d in $builds; do : > "$B/runs-$(echo "$d" | tr / _)"; done
	for r in $(seq "$runs"); do
		for d in $builds; do daemon_run "$d" "$B/$src" >> "$B/runs-$(echo "$d" | tr / _)"; done
	done
	for d in $builds; do
		f=$B/runs-$(echo "$d" | tr / _)
		echo "$src: mount to ready $(cut -d' ' -f1 "$f" | median)s," \
			"epoch switch $(cut -d' ' -f2 "$f" | median)s," \
			"start peak RSS $(cut -d' ' -f3 "$f" | median) KB," \
			"daemon peak RSS $(cut -d' ' -f4 "$f" | median) KB ($d)"
	done
done
