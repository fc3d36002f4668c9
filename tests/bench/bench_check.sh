#!/usr/bin/env bash
# The auditor benchmark, results in docs/benchmarks.md ("The auditor").
# Usage: tests/bench/bench_check.sh [RUNS]   (as root: it mounts)
#
# On the ~2 GiB dataset of bench_read.sh, mounted as slices for 1 rank x 4
# workers (warm page cache): `shardfs-check view` against `cat` of the same
# view files through the same mount, in one run.  Rates are bytes of the
# view per second; each figure is the median of RUNS (default 3).
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
. "$top/tests/bench/lib.sh"
runs=${1:-3}
bin=$top/build
cmake -S "$top" -B "$bin" >/dev/null && cmake --build "$bin" -j "$(nproc)" >/dev/null
B=${BENCH_DIR:-/tmp/shardfs-bench}
src=$B/read-64
if [ ! -d "$src" ]; then
	mkdir -p "$B"
	"$bin/shardfs-mkdata" "$src" --shards 64 --samples "$(bench_size 300 40)" \
		--size "$(bench_size 50000-60000 20000-30000)" --members 2 --seed 3
fi
[ -f "$src/.shardfs/manifest.json" ] || "$bin/shardfs-index" "$src" --no-hash --quiet
m=$B/m-check
mkdir -p "$m"
trap 'mountpoint -q "$m" && fusermount3 -u "$m"' EXIT
"$bin/shardfs" "$src" "$m" -o world=1,workers=4,shuffle=none,block=$(bench_size 150 20)
bytes=$(find "$m/0" -type f -printf '%s\n' | awk '{s += $1} END {print s}')
find "$m/0" -type f -exec cat {} + > /dev/null  # warm
cat "$src"/*.tar > /dev/null
tc=$(for r in $(seq "$runs"); do timed sh -c "find '$m/0' -type f -exec cat {} + > /dev/null"; done | median)
ta=$(for r in $(seq "$runs"); do timed "$bin/shardfs-check" view "$m"; done | median)
awk -v b="$bytes" -v c="$tc" -v a="$ta" 'BEGIN {
	printf "view: %.2f GB of slices\n", b / 1e9
	printf "cat through the mount: %.2fs, %.2f GB/s\n", c, b / c / 1e9
	printf "shardfs-check view:    %.2fs, %.2f GB/s of view (the source is not read: the index holds every sample digest)\n", a, b / a / 1e9
	printf "audit rate / cat rate: %.2f\n", c / a }'
