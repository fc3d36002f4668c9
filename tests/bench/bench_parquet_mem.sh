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
# files.  READ=open: then, the seconds the first read of each of the last
# 5 files of rank 2's last worker takes (slices the view most likely did
# not keep in memory: laid out at open, or read back from the daemon's
# file of slices), their median; READ=all: that, then rank 0's files read
# whole through DuckDB (every value hashed, 2 threads): its seconds, the
# daemon's CPU seconds meanwhile, its peak RSS after, the bytes of its
# file of slices (in TMPDIR, $BENCH_DIR/.../tmp here) and the status's
# slices_spilled and slices_laid_out.
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
mkdir -p "$m" "$B/tmp"
read=${READ:-}
pid=""
cleanup() {
	if grep -qF " $m " /proc/mounts; then fusermount3 -u "$m"; fi
	[ -z "$pid" ] || wait "$pid" || true
}
trap cleanup EXIT
tick=$(getconf CLK_TCK)
# since T0 (date +%s.%N): the seconds now
since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN {printf "%.2f", b - a}'; }
ready=""; both=""; peak=""; cpu=""; opened=""; scan=""; rcpu=""; rpeak=""
# cpu: the daemon's CPU seconds so far
cpu_now() { awk -v t="$tick" '{printf "%.2f", ($14 + $15) / t}' "/proc/$pid/stat"; }
# counter NAME: the status's counter NAME, "-" where it has none
counter() {
	python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["counters"].get(sys.argv[2], "-"))' \
		"$m/.shardfs/status" "$1"
}
echo "== $files files of $rows rows, one row group each ($(du -sh "$B/src" | cut -f1)), -o $opts; $bin/shardfs"
for r in $(seq "$runs"); do
	t0=$(date +%s.%N)
	TMPDIR=$B/tmp "$bin/shardfs" "$B/src" "$m" -f -o "$opts" > /dev/null 2> "$B/log" &
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
	more=""
	if [ -n "$read" ]; then
		w=$(ls -d "$m"/2/* | tail -1)
		o=""
		for f in $(ls "$w" | tail -5); do
			o+="$(timed head -c 4 "$w/$f")"$'\n'
		done
		o=$(echo -n "$o" | median)
		opened+="$o"$'\n'
		more=", first read of a slice ${o}s"
	fi
	if [ "$read" == all ]; then
		c0=$(cpu_now)
		s=$(cd "$npmdir" && timed node bench.mjs scan "$m/0/*/*.parquet" 1)
		rc=$(awk -v a="$c0" -v b="$(cpu_now)" 'BEGIN {printf "%.2f", b - a}')
		rh=$(awk '/^VmHWM:/ {printf "%.0f", $2 / 1024}' "/proc/$pid/status")
		disk=0
		for l in /proc/"$pid"/fd/*; do
			case "$(readlink "$l" || true)" in
			"$B/tmp/"*) disk=$((disk + $(stat -L -c %s "$l"))) ;;
			esac
		done
		scan+="$s"$'\n'; rcpu+="$rc"$'\n'; rpeak+="$rh"$'\n'
		more+=", rank 0 read in ${s}s, daemon CPU ${rc}s, peak ${rh} MiB, file of slices $((disk >> 20)) MiB, spilled $(counter slices_spilled), laid out $(counter slices_laid_out)"
	fi
	fusermount3 -u "$m"
	wait "$pid" || true
	pid=""
	echo "run $r: ready ${t1}s, both views ${t2}s, peak ${hwm} MiB, CPU ${c}s, load $load$more"
	ready+="$t1"$'\n'; both+="$t2"$'\n'; peak+="$hwm"$'\n'; cpu+="$c"$'\n'
done
echo "median of $runs: ready $(echo -n "$ready" | median)s, both views $(echo -n "$both" | median)s, peak $(echo -n "$peak" | median) MiB, CPU $(echo -n "$cpu" | median)s"
[ -z "$read" ] ||
	echo "  first read of a slice $(echo -n "$opened" | median)s"
[ "$read" != all ] ||
	echo "  rank 0 read $(echo -n "$scan" | median)s, daemon CPU $(echo -n "$rcpu" | median)s, peak $(echo -n "$rpeak" | median) MiB"
