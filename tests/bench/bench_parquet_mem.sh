#!/usr/bin/env bash
# The daemon's peak memory when row groups are cut into many slices,
# results in docs/benchmarks.md ("One row group cut into many slices")
# and docs/formats.md ("Costs"): FILES DuckDB files of ROWS rows each
# (bench_parquet.sh's columns: id BIGINT, text VARCHAR of 96 characters,
# score DOUBLE, tag INTEGER; snappy; one row group a file, DuckDB's pages
# a column chunk each: ~187 MiB decoded a file at 850 000 rows), mounted
# with OPTS (default world=3,workers=2,block=1000: 850 slices a file,
# each cutting the row group's four pages; ahead=1 builds the next
# epoch's view once the first is served).  Each run, a fresh daemon:
# seconds from its start until mounted (ready), until its status says
# the next epoch's view is built too (both), its peak RSS then (VmHWM,
# MiB), its CPU seconds (utime + stime), and the load.  Medians of RUNS.
# BIN: the build directory whose shardfs to run (default: build/, built
# here), so that another commit's build can be measured with the same
# files.
# Usage: tests/bench/bench_parquet_mem.sh [RUNS [ROWS [FILES [OPTS]]]]
# (as root: it mounts)
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
. "$top/tests/bench/lib.sh"
need node npm
. "$top/tests/cli/parquet/npm.sh"
runs=${1:-3}
rows=${2:-850000}
files=${3:-3}
opts=${4:-world=3,workers=2,block=1000}
bin=${BIN:-$top/build}
if [ -z "${BIN:-}" ]; then
	cmake -S "$top" -B "$bin" > /dev/null && nice cmake --build "$bin" -j 2 > /dev/null
fi
parquet_npm "$top/build" "$top/tests"
B=${BENCH_DIR:-/tmp/shardfs-bench}/parquet-mem-$files-$rows
if [ ! -f "$B/src/.done" ]; then
	rm -rf "$B/src"
	mkdir -p "$B/src"
	(cd "$npmdir" && node bench.mjs write "$B/src" "$files" "$rows" "$rows")
	touch "$B/src/.done"
fi
[ -f "$B/src/.shardfs/manifest.json" ] ||
	"$bin/shardfs-index" "$B/src" --no-hash --quiet
m=$B/mnt
mkdir -p "$m"
pid=""
cleanup() {
	if grep -qF " $m " /proc/mounts; then fusermount3 -u "$m"; fi
	[ -z "$pid" ] || wait "$pid" || true
}
trap cleanup EXIT
tick=$(getconf CLK_TCK)
# since T0 (date +%s.%N): the seconds now
since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN {printf "%.2f", b - a}'; }
ready=""; both=""; peak=""; cpu=""
echo "== $files files of $rows rows, one row group each ($(du -sh "$B/src" | cut -f1)), -o $opts; $bin/shardfs"
for r in $(seq "$runs"); do
	t0=$(date +%s.%N)
	"$bin/shardfs" "$B/src" "$m" -f -o "$opts" > /dev/null 2> "$B/log" &
	pid=$!
	until mountpoint -q "$m"; do
		kill -0 "$pid" 2> /dev/null || { cat "$B/log" >&2; exit 1; }
		sleep 0.02
	done
	t1=$(since "$t0")
	until grep -q '"ahead": *[0-9]' "$m/.shardfs/status"; do sleep 0.05; done
	t2=$(since "$t0")
	hwm=$(awk '/^VmHWM:/ {printf "%.0f", $2 / 1024}' "/proc/$pid/status")
	c=$(awk -v t="$tick" '{printf "%.2f", ($14 + $15) / t}' "/proc/$pid/stat")
	load=$(cut -d' ' -f1 /proc/loadavg)
	fusermount3 -u "$m"
	wait "$pid" || true
	pid=""
	echo "run $r: ready ${t1}s, both views ${t2}s, peak ${hwm} MiB, CPU ${c}s, load $load"
	ready+="$t1"$'\n'; both+="$t2"$'\n'; peak+="$hwm"$'\n'; cpu+="$c"$'\n'
done
echo "median of $runs: ready $(echo -n "$ready" | median)s, both views $(echo -n "$both" | median)s, peak $(echo -n "$peak" | median) MiB, CPU $(echo -n "$cpu" | median)s"
