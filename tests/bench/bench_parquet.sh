#!/usr/bin/env bash
# Parquet shards, results in docs/benchmarks.md ("Parquet").  Files written
# by DuckDB (id BIGINT, text VARCHAR of 96 chars, score DOUBLE, tag
# INTEGER; snappy; ROWS rows in 8 files):
#   - indexing: shardfs-index --no-hash (footers only) and with hashes
#     (every row decoded and digested) against DuckDB reading the same
#     files: count(*) (footers only) and a hash of every value; and one
#     file of all ROWS rows in row groups of 1 000 000 (a Spark part
#     file; written by pyarrow when PYARROW_PYTHON has it, see below):
#     the indexer's peak memory must not grow with its rows; its
#     time side by side with pyarrow's read_table (PYARROW_PYTHON);
#   - one cut: the slice of half a row group (a cut at both ends) against
#     the slice of the whole row group, for row groups of about 10 000 and
#     100 000 rows: time to lay out, bytes synthesized (re-encoded pages and
#     the footer);
#   - mount to ready with cuts, and the first read (cold caches, a fresh
#     mount each run: the open finds the slice the mount laid out) of a
#     slice with two cut row groups, through the mount, against reading as
#     many bytes of the source file;
#   - mount to ready of a view that cuts one file of 400 000 one-row row
#     groups (tests/mount/hostile_parquet.py) into 200 slices: the footer
#     decoded once for all of them;
#   - shuffle=samples (a cut per row) over 20 readers: mount, read every
#     file, unmount;
#   - the cold first read of the cut slices of 8 shardfs-mkdata shards
#     (world=3,workers=2, epochs 1-3) with pyarrow, against pyarrow
#     reading the shards they are cut from (rows/s; PYARROW_PYTHON);
#   - rank 1 of world=4 reading its share with DuckDB through the mount
#     against the same rows read from the source by LIMIT/OFFSET.
# Every figure is the median of RUNS.
# Usage: tests/bench/bench_parquet.sh [ROWS [RUNS]]   (as root: it mounts)
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
. "$top/tests/bench/lib.sh"
need /usr/bin/time node npm
. "$top/tests/cli/parquet/npm.sh"
rows=${1:-4000000}
runs=${2:-5}
bin=$top/build
cmake -S "$top" -B "$bin" >/dev/null && cmake --build "$bin" -j "$(nproc)" >/dev/null
parquet_npm "$bin" "$top/tests"
B=${BENCH_DIR:-/tmp/shardfs-bench}/parquet-$rows
per=$((rows / 8))
for g in 100000 10000; do
	if [ ! -f "$B/g$g/.done" ]; then
		rm -rf "$B/g$g"
		mkdir -p "$B/g$g"
		(cd "$npmdir" && node bench.mjs write "$B/g$g" 8 "$per" "$g")
		touch "$B/g$g/.done"
	fi
done
duck() { (cd "$npmdir" && node bench.mjs "$@"); }
drop() { sync; echo 3 > /proc/sys/vm/drop_caches; }
m=$B/mnt
cleanup() { mountpoint -q "$m" && fusermount3 -u "$m"; return 0; }
trap cleanup EXIT
mkdir -p "$m"

echo "== indexing $rows rows in 8 files (du: $(du -sh "$B/g100000" | cut -f1))"
ix() { rm -rf "$B/ix"; "$bin/shardfs-index" "$B/g100000" --out "$B/ix" --quiet "$@"; }
t=$(for r in $(seq "$runs"); do timed ix --no-hash; done | median)
echo "shardfs-index --no-hash: ${t}s; DuckDB count(*): $(duck count "$B/g100000/*.parquet" "$runs")s"
t=$(for r in $(seq "$runs"); do timed ix; done | median)
echo "shardfs-index (row digests): ${t}s; DuckDB hash of every value: $(duck scan "$B/g100000/*.parquet" "$runs")s"
peak=$(/usr/bin/time -f %M "$bin/shardfs-index" "$B/g100000" --out "$B/ix" --quiet 2>&1 | tail -1)
echo "shardfs-index peak RSS: ${peak} KB"

echo
echo "== indexing one file of $rows rows, row groups of 1 000 000"
# PYARROW_PYTHON: a python with pyarrow (e.g. a venv of tests/README.md).
# pyarrow writes the file when it can, in pages of 1 MiB, as the figures
# of docs/benchmarks.md were measured (and the side by side below reads
# it with pyarrow); else DuckDB, whose pages are a column chunk's values
# up to 100 MiB (one page of 95 MiB for a row group of a million 96-byte
# strings: read since the page budget stopped counting a page's
# compressed bytes with what it decodes to)
py=${PYARROW_PYTHON:-python3}
if [ ! -f "$B/big/.done" ]; then
	rm -rf "$B/big"
	mkdir -p "$B/big"
	if "$py" -c 'import pyarrow.parquet' 2> /dev/null; then
		"$py" - "$B/big/part-00000.parquet" "$rows" <<-'EOF'
			import hashlib, sys
			import pyarrow as pa, pyarrow.parquet as pq
			path, rows = sys.argv[1], int(sys.argv[2])
			schema = pa.schema([("id", pa.int64()), ("text", pa.string()),
			                    ("score", pa.float64()), ("tag", pa.int32())])
			with pq.ParquetWriter(path, schema, compression="snappy") as w:
			    for lo in range(0, rows, 1000000):
			        ids = range(lo, min(rows, lo + 1000000))
			        w.write_table(pa.table({
			            "id": pa.array(ids, pa.int64()),
			            "text": [hashlib.md5(str(i).encode()).hexdigest() * 3
			                     for i in ids],
			            "score": [i * 0.25 for i in ids],
			            "tag": pa.array([i % 1000 for i in ids], pa.int32()),
			        }, schema=schema), row_group_size=1000000)
		EOF
	else
		(cd "$npmdir" && node bench.mjs write "$B/big" 1 "$rows" 1000000)
	fi
	touch "$B/big/.done"
fi
ixbig() { rm -rf "$B/ixbig"; "$bin/shardfs-index" "$B/big" --out "$B/ixbig" --quiet; }
t=$(for r in $(seq "$runs"); do timed ixbig; done | median)
d=$(duck scan "$B/big/*.parquet" "$runs")
peak=$(/usr/bin/time -f %M "$bin/shardfs-index" "$B/big" --out "$B/ixbig" --quiet 2>&1 | tail -1)
echo "one file: shardfs-index ${t}s, peak RSS ${peak} KB; DuckDB hash of every value: ${d}s; ratio $(ratio "$t" "$d")"
# side by side with pyarrow reading the file's columns (PYARROW_PYTHON, as
# below): whole processes, alternated, medians of wall and of CPU seconds
# (user + system: the figure that holds on a shared machine)
if "$py" -c 'import pyarrow.parquet' 2> /dev/null; then
	# wall_cpu CMD...: "WALL CPU" seconds of CMD
	wall_cpu() {
		/usr/bin/time -f "%e %U %S" -o "$B/time" "$@" > /dev/null
		awk '{print $1, $2 + $3}' "$B/time"
	}
	pa=""
	ix=""
	for r in $(seq "$runs"); do
		pa+="$(wall_cpu "$py" -c 'import sys, pyarrow.parquet as pq; pq.read_table(sys.argv[1])' "$B"/big/*.parquet)"$'\n'
		rm -rf "$B/ixbig"
		ix+="$(wall_cpu "$bin/shardfs-index" "$B/big" --out "$B/ixbig" --quiet)"$'\n'
	done
	paw=$(echo -n "$pa" | cut -d' ' -f1 | median)
	pac=$(echo -n "$pa" | cut -d' ' -f2 | median)
	ixw=$(echo -n "$ix" | cut -d' ' -f1 | median)
	ixc=$(echo -n "$ix" | cut -d' ' -f2 | median)
	echo "one file against pyarrow read_table (python's start-up included), alternated, median of $runs: wall ${ixw}s against ${paw}s, ratio $(ratio "$ixw" "$paw"); CPU ${ixc}s against ${pac}s, ratio $(ratio "$ixc" "$pac") (the aim: 2.00 or less)"
	rm -f "$B/time"
else
	echo "one file against pyarrow: skipped: $py cannot import pyarrow (set PYARROW_PYTHON)"
fi
rm -rf "$B/ixbig"

echo
echo "== one cut"
for g in 100000 10000; do
	"$bin/shardfs-index" "$B/g$g" --no-hash --quiet
	# DuckDB rounds row groups to its vectors: the real size
	n0=$(duck groups "$B/g$g/part-00000.parquet")
	for run in "0:$n0" "$((n0 / 4)):$((n0 / 2))"; do
		line=$(for r in $(seq "$runs"); do
			"$bin/tests/slice-dump" "$B/g$g" part-00000.parquet "$run" "$B/slice.parquet" stats
		done | sort -t' ' -k4 -g | sed -n "$(((runs + 1) / 2))p")
		echo "row groups of $n0 rows, rows $run: $line"
	done
done
rm -f "$B/slice.parquet"

echo
echo "== first read of a slice with two cut row groups (world=3, reader 1: rows $((per / 3))..)"
mkdir -p "$B/one"
ln -f "$B/g100000/part-00000.parquet" "$B/one/part-00000.parquet"
"$bin/shardfs-index" "$B/one" --no-hash --quiet
ready=""; view=""; second=""
for r in $(seq "$runs"); do
	drop
	ready+="$(timed "$bin/shardfs" "$B/one" "$m" -o world=3,workers=1,shuffle=none)"$'\n'
	f=$(ls "$m"/1/0/*)
	drop
	view+="$(timed cat "$f")"$'\n'
	drop
	second+="$(timed cat "$f")"$'\n'
	size=$(stat -c %s "$f")
	fusermount3 -u "$m"
done
ready=$(echo -n "$ready" | median)
view=$(echo -n "$view" | median)
second=$(echo -n "$second" | median)
direct=$(for r in $(seq "$runs"); do drop; timed head -c "$size" "$B/one/part-00000.parquet"; done | median)
echo "mount to ready (sizes the slices: 4 cuts): ${ready}s"
echo "$(basename "$f"): $size bytes, first read (cold) ${view}s, a second one (cold) ${second}s; the same bytes of the source ${direct}s ($(ratio "$direct" "$view") of direct)"

echo
echo "== 200 slices of one file of 400 000 one-row row groups"
if [ ! -f "$B/rg400k/rg.parquet" ]; then
	mkdir -p "$B/rg400k"
	python3 "$top/tests/mount/hostile_parquet.py" rowgroups "$B/rg400k/rg.parquet" 400000
fi
"$bin/shardfs-index" "$B/rg400k" --no-hash --quiet
t=$(for r in $(seq "$runs"); do
	timed "$bin/shardfs" "$B/rg400k" "$m" -o world=200,workers=1,shuffle=none
	fusermount3 -u "$m"
done | median)
echo "mount to ready (a $(du -h "$B/rg400k/rg.parquet" | cut -f1) file, 200 slices of 2 000 row groups): ${t}s"

echo
echo "== shuffle=samples: a cut per row (20 000 rows, row groups of 2 048, 20 readers: 1 000 one-row row groups each, a view refuses more than 1 024)"
if [ ! -f "$B/s20k/.done" ]; then
	rm -rf "$B/s20k"
	mkdir -p "$B/s20k"
	(cd "$npmdir" && node bench.mjs write "$B/s20k" 1 20000 2048)
	touch "$B/s20k/.done"
fi
"$bin/shardfs-index" "$B/s20k" --no-hash --quiet
t=$(for r in $(seq "$runs"); do
	timed sh -c "'$bin/shardfs' '$B/s20k' '$m' -o world=5,workers=4,shuffle=samples,block=0 && cat '$m'/*/*/* > /dev/null; fusermount3 -u '$m'"
done | median)
echo "mount, read every file, unmount: ${t}s"

echo
echo "== cold first read of cut slices with pyarrow: 8 shardfs-mkdata shards of 40-60 k rows, world=3,workers=2, epochs 1-3, against pyarrow reading the shards they are cut from"
# PYARROW_PYTHON: a python with pyarrow (e.g. a venv of tests/README.md)
py=${PYARROW_PYTHON:-python3}
if ! "$py" -c 'import pyarrow.parquet' 2> /dev/null; then
	echo "skipped: $py cannot import pyarrow (set PYARROW_PYTHON)"
else
	if [ ! -f "$B/mk/.done" ]; then
		rm -rf "$B/mk"
		"$bin/shardfs-mkdata" "$B/mk" --format parquet --shards 8 --samples 40000-60000 > /dev/null
		touch "$B/mk/.done"
	fi
	"$bin/shardfs-index" "$B/mk" --no-hash --quiet
	# the seconds and rows pyarrow takes to read FILE...
	pyread() { "$py" -c 'import sys, time, pyarrow.parquet as pq
t = time.monotonic(); n = sum(pq.read_table(p).num_rows for p in sys.argv[1:])
print("%.3f %d" % (time.monotonic() - t, n))' "$@"; }
	rs=""
	for r in $(seq "$runs"); do
		for e in 1 2 3; do
			"$bin/shardfs" "$B/mk" "$m" -o world=3,workers=2,epoch=$e
			# the cut slices (a whole shard is a symlink), and their shards
			cut=$(find "$m"/[0-9]* -type f -size +10k | sort)
			src=$(for f in $cut; do b=$(basename "$f"); b=${b#*-}; echo "$B/mk/${b%%.*}.parquet"; done | sort -u)
			drop
			v=$(pyread $cut)
			fusermount3 -u "$m"
			drop
			s=$(pyread $src)
			rs+="$(echo "$v $s" | awk '{printf "%.2f", ($2 / $1) / ($4 / $3)}')"$'\n'
			echo "epoch $e: slices ${v% *}s, the source ${s% *}s (${v#* } and ${s#* } rows), load $(cut -d' ' -f1 /proc/loadavg)"
		done
	done
	echo "rows/s of the slices over the source's, median of $((runs * 3)): $(echo -n "$rs" | median)"
fi

echo
echo "== rank 1 of world=4 reads its share with DuckDB (warm caches)"
"$bin/shardfs-index" "$B/g100000" --no-hash --quiet
"$bin/shardfs" "$B/g100000" "$m" -o world=4,workers=1,shuffle=none
n=$((rows / 4))
duck scan "$m/1/0/*.parquet" 1 > /dev/null
mnt=$(duck scan "$m/1/0/*.parquet" "$runs")
src=$(duck share "$B/g100000/*.parquet" "$n" "$n" "$runs")
fusermount3 -u "$m"
echo "through the mount ${mnt}s; LIMIT $n OFFSET $n on the source ${src}s ($(ratio "$src" "$mnt") of the source's speed)"
