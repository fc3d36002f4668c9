#!/usr/bin/env bash
# Lance datasets, results in docs/benchmarks.md ("Lance").  Datasets
# written by pylance 14.0.2 (tests/mount/lance/requirements.txt,
# tests/bench/lance_bench.py), made once and kept under $BENCH_DIR:
#   frags: FRAGS fragments of 10 rows (id, key), rows id % 100 = 7
#          deleted (a deletion file in every tenth fragment); nodel: the
#          same without deletions;
#   scan:  ROWS rows (id, key, a 128-float vector) in fragments of
#          ROWS/8; scandel: DROWS rows so, then the rows
#          id % 100 in (7, 42) deleted (a deletion file in every
#          fragment).  pylance's take() is slow on a dataset with
#          deletions (docs/benchmarks.md): DROWS is kept small.
# Measured:
#   - indexing: shardfs-index (--no-hash and hashing) against pylance's
#     own lance.dataset(d).count_rows(): the whole process each (with
#     Python's start and import lance, and the C tool's start), and
#     inside one Python process (after the import);
#   - mount to ready for the FRAGS-fragment datasets under a few plans
#     (every reader's dataset built before the mount answers), and
#     pylance opening one reader's dataset (count_rows) through the mount
#     against opening the source;
#   - rank 1 of world=4 (workers=1) reading its rows whole through its
#     dataset in the mount (lance.dataset(view).to_table()) against the
#     same rows from the source, by Lance's ShardedBatchSampler (the plan
#     partition=interleaved,batch=B, its rows exactly the sampler's) and
#     by dataset.take() of the plan's row offsets; and contiguous, and
#     contiguous with symlinks=0 (the data files read through the mount).
#     Warm page cache; the rows of each way are checked to be the plan's.
# Every figure is the median of RUNS (the full world=64,workers=8 mount
# of frags: once).
# Usage: tests/bench/bench_lance.sh [FRAGS [ROWS [DROWS [RUNS]]]]
#        (as root: it mounts; defaults 10000 400000 40000 5)
#        tests/bench/bench_lance.sh --smoke   (tiny: 200 fragments,
#        4000 rows, one run; what tests/bench/smoke.sh runs)
# The build directory is $BENCH_BUILD (default: the tree's build/, built
# first).
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
[ "${1:-}" = --smoke ] && { export BENCH_SMOKE=1; shift; }
. "$top/tests/bench/lib.sh"
need python3 fusermount3 mountpoint
frags=${1:-$(bench_size 10000 200)}
rows=${2:-$(bench_size 400000 4000)}
drows=${3:-$(bench_size 40000 4000)}
runs=${4:-$(bench_size 5 1)}
batch=$(bench_size 100 10)
bin=${BENCH_BUILD:-$top/build}
if [ -z "${BENCH_BUILD:-}" ]; then
	cmake -S "$top" -B "$bin" > /dev/null && cmake --build "$bin" -j "$(nproc)" > /dev/null
fi
venv=$(bash "$top/tests/python/venv.sh" "$top/tests/mount/lance/requirements.txt")
PY=$venv/bin/python
drv=$top/tests/bench/lance_bench.py
B=${BENCH_DIR:-/tmp/shardfs-bench}/lance
mkdir -p "$B"
m=$B/mnt
cleanup() { mountpoint -q "$m" && fusermount3 -u "$m"; return 0; }
trap cleanup EXIT
mkdir -p "$m"

# made NAME CMD...: run CMD to write $B/NAME once (a .done marker)
made() {
	local d=$B/$1
	shift
	if [ ! -f "$d.done" ]; then
		rm -rf "$d"
		echo "writing $d" >&2
		"$@"
		touch "$d.done"
	fi
	[ -f "$d/.shardfs/manifest.json" ] || "$bin/shardfs-index" "$d" --quiet
}
made frags-$frags "$PY" "$drv" write-frags "$B/frags-$frags" "$frags" 10 1
made nodel-$frags "$PY" "$drv" write-frags "$B/nodel-$frags" "$frags" 10 0
made scan-$rows "$PY" "$drv" write-scan "$B/scan-$rows" "$rows" 128 $((rows / 8)) 0
made scandel-$drows "$PY" "$drv" write-scan "$B/scandel-$drows" "$drows" 128 $((drows / 8)) 1

# med CMD...: median wall seconds of $runs runs of CMD, three decimals
med() {
	local i
	for i in $(seq "$runs"); do timed "$@"; done | median | awk '{printf "%.3f", $1}'
}
# field LINE KEY: the number after KEY in LINE
field() { awk -v k="$2" '{for (i = 1; i < NF; i++) if ($i == k) print $(i + 1)}' <<< "$1"; }

echo "== indexing (warm page cache; medians of $runs)"
"$bin/shardfs-index" --version > /dev/null
start=$(med "$bin/shardfs-index" --version)
imp=$(med "$PY" -c "import lance")
echo "process start: shardfs-index --version ${start}s; python3 -c 'import lance' ${imp}s"
for ds in frags-$frags scan-$rows scandel-$drows; do
	d=$B/$ds
	ix() { rm -rf "$B/ix" && "$bin/shardfs-index" "$d" --out "$B/ix" --quiet "$@"; }
	nohash=$(med ix --no-hash)
	hash=$(med ix)
	proc=$(med "$PY" -c "import lance; lance.dataset('$d').count_rows()")
	line=$("$PY" "$drv" count "$d" "$runs")
	inproc=$(field "$line" median)
	echo "$ds ($(field "$line" rows) rows, $(du -sh "$d" | cut -f1)):" \
		"shardfs-index --no-hash ${nohash}s, hashing ${hash}s;" \
		"pylance count_rows: process ${proc}s, in-process $(field "$line" first)s first," \
		"${inproc}s again (time ratios: --no-hash / pylance process $(ratio "$nohash" "$proc")," \
		"--no-hash less the C start / pylance's first in-process $(ratio "$(awk -v a="$nohash" -v b="$start" 'BEGIN {print a - b}')" "$(field "$line" first)"))"
done
rm -rf "$B/ix"

echo
echo "== mount to ready, $frags fragments (medians of $runs)"
# ready SRC OPTIONS: median seconds from the daemon's start to the mount
# answering (the daemon forks away once its view is built)
ready() {
	local i
	for i in $(seq "$runs"); do
		timed "$bin/shardfs" "$1" "$m" -o "$2"
		fusermount3 -u "$m"
	done | median | awk '{printf "%.3f", $1}'
}
for ds in nodel-$frags frags-$frags; do
	for o in world=64,workers=8,rank=0 world=8,workers=2 world=16,workers=4; do
		echo "$ds $o: ready $(ready "$B/$ds" "$o")s"
	done
done
runs_saved=$runs
runs=1
echo "frags-$frags world=64,workers=8 (512 readers' datasets, once): ready $(ready "$B/frags-$frags" world=64,workers=8)s"
runs=$runs_saved
src=$("$PY" "$drv" count "$B/frags-$frags" "$runs")
"$bin/shardfs" "$B/frags-$frags" "$m" -o world=8,workers=2
view=$("$PY" "$drv" count "$m/3/1/frags-$frags" "$runs")
fusermount3 -u "$m"
echo "pylance opens the source (count_rows, $(field "$src" rows) rows): $(field "$src" median)s;" \
	"reader 3/1's dataset of world=8,workers=2 ($(field "$view" rows) rows) through the mount: $(field "$view" median)s" \
	"(time ratio view / source $(ratio "$(field "$view" median)" "$(field "$src" median)"))"

# scan DATASET OPTIONS LABEL [--sampler]: mount, read rank 1's rows
# three ways
scan() {
	local d=$B/$1 line live
	live=$("$PY" -c "import lance; print(lance.dataset('$d').count_rows())")
	[ -z "${4:-}" ] || [ $((live % (4 * batch))) -eq 0 ] ||
		{ echo "$1: $live live rows: not a multiple of 4 x $batch, so ShardedBatchSampler's ranks would differ from an equal plan" >&2; exit 1; }
	"$bin/shardfs" "$d" "$m" -o "$2"
	line=$("$PY" "$drv" scan "$d" "$m/1/0/$1" "$m/.shardfs/plan.json" 1 4 "$batch" "$runs" ${4:-})
	fusermount3 -u "$m"
	echo "$1, $3: $(field "$line" rows) rows in $(field "$line" fragments) fragments:" \
		"through the mount $(field "$line" view)s; take() of the same rows from the source $(field "$line" take)s" \
		"(time ratio view / take $(ratio "$(field "$line" view)" "$(field "$line" take)"))" \
		${4:+"; ShardedBatchSampler(1, 4, batch_size=$batch) $(field "$line" sampler)s (view / sampler $(ratio "$(field "$line" view)" "$(field "$line" sampler)"))"}
}
echo
echo "== rank 1 of world=4 reads its rows (medians of $runs, warm)"
for ds in scan-$rows scandel-$drows; do
	echo "$ds: $(du -sh "$B/$ds" | cut -f1)"
	scan "$ds" world=4,workers=1,partition=interleaved,batch=$batch,shuffle=none "interleaved, batch=$batch" --sampler
	scan "$ds" world=4,workers=1,shuffle=none "contiguous"
done
scan "scan-$rows" world=4,workers=1,shuffle=none,symlinks=0 "contiguous, symlinks=0"
