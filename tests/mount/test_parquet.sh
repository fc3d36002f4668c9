#!/usr/bin/env bash
# Parquet shards mounted for real and cut to the row: files written by
# DuckDB and parquet-wasm (tests/cli/parquet/write.mjs: every codec, v1/v2
# pages, dictionaries, PLAIN, dictionary, RLE, DELTA_* and
# BYTE_STREAM_SPLIT encodings, nullable and nested columns) and by
# shardfs-mkdata, and by pyarrow with row groups of no rows, under a
# grid of plan options; every view file read by DuckDB, hyparquet and
# parquet-wasm as exactly the rows its plan names (tests/cli/parquet/views.mjs),
# equal rows per reader; the auditor proves every row by its digest; bad
# files are refused with the file, the byte and what is wrong.
. "$(dirname "$0")/../lib.sh"
. "$TESTS/cli/parquet/npm.sh"
parquet_npm "$BUILD" "$TESTS" || { bad "install the npm packages"; finish; exit; }

PASS="0:PASS: disjoint, nothing missing, equal counts, every sample's bytes and order as planned"

mkdir "$T/duck" "$T/small"
node "$npmdir/write.mjs" "$T/duck" || bad "write.mjs"
node "$npmdir/write.mjs" "$T/duck" codecs || bad "write.mjs codecs"
node "$npmdir/write.mjs" "$T/small" seeds || bad "write.mjs seeds"
shardfs-mkdata "$T/mk" --format parquet --shards 5 --samples 30-200 --size 1-80 --seed 7 > /dev/null
expect_eq "files written" "$(ls "$T/duck" | wc -l) $(ls "$T/small" | wc -l)" "13 2"
shardfs-index "$T/duck" --quiet || bad "index the DuckDB/parquet-wasm files"
shardfs-index "$T/small" --quiet || bad "index the small DuckDB/parquet-wasm files"
shardfs-index "$T/mk" --quiet || bad "index the mkdata files"
expect_eq "rows of the mkdata files" \
	"$(shardfs-check plan "$T/mk" -o world=1 | grep -o '[0-9]* samples each')" \
	"$(cd "$npmdir" && node -e '
		const { DuckDBInstance } = await import("@duckdb/node-api");
		const con = await (await DuckDBInstance.create(":memory:")).connect();
		const r = await con.runAndReadAll(`SELECT count(*)::INTEGER n FROM read_parquet("'"$T"'/mk/*.parquet")`);
		console.log(`${r.getRowObjectsJson()[0].n} samples each`);' --input-type=module)"

# the DuckDB recipe of docs/loaders.md, as written there
sed -n '/^-- recipe: parquet_duckdb$/,/^```$/p' "$TESTS/../docs/loaders.md" | sed '$d' > "$T/recipe.sql"
expect_eq "the recipe is in docs/loaders.md" "$(grep -c read_parquet "$T/recipe.sql")" 1

# check SRC OPTIONS: mount, read every file with the three readers and the
# recipe (and pyarrow, $pa, when set), audit
check() {
	local src=$1 opts=$2 M=$T/m out
	mount_view "$src" "$M" "$opts" || { bad "mount $src $opts"; return; }
	out=$(cd "$npmdir" && node views.mjs "$M" "$src" "$T/recipe.sql" 2>&1)
	expect_eq "$(basename "$src") $opts: every file's rows in DuckDB, hyparquet, parquet-wasm" \
		"$?" 0 || echo "$out" >&2
	if [ -n "${pa:-}" ]; then
		out=$("$pa" "$TESTS/mount/parquet_empty_groups.py" read "$M" "$src" 2>&1)
		expect_eq "$(basename "$src") $opts: every file's rows in pyarrow" \
			"$?" 0 || echo "$out" >&2
	fi
	out=$(shardfs-check view "$M")
	expect_eq "$(basename "$src") $opts: the auditor passes" "$?:$(echo "$out" | tail -1)" "$PASS" ||
		echo "$out" >&2
	unmount_view "$M"
}

check "$T/duck" world=3,workers=2
check "$T/duck" world=3,workers=1,partition=interleaved,batch=64,remainder=drop,shuffle=units,block=1000
check "$T/duck" world=4,workers=2,block=999,start=777,symlinks=0
# shuffle=samples: every row a cut of its own (slow: a cut per row; small)
check "$T/small" world=2,workers=2,shuffle=samples,block=0,seed=3,epoch=1
check "$T/mk" world=2,workers=3
check "$T/mk" world=2,workers=2,shuffle=samples,block=0,remainder=drop
check "$T/mk" world=3,workers=2,partition=interleaved,batch=5,start=11

# DuckDB writes a column chunk's pages up to 100 MiB: its row group of
# 850 000 strings of 96 characters (bench_parquet.sh's files, one row
# group; 39 MB) holds a page of 81 MiB (30 MiB compressed) that was
# refused as decoding past a page's 128 MiB when its compressed bytes,
# freed before its entries are made, were counted with them (134 MiB).
# Indexed and served: every file's rows and their bytes as planned
# (views_md5.mjs: too many rows for views.mjs), equal rows per reader.
mkdir "$T/big"
(cd "$npmdir" && node bench.mjs write "$T/big" 1 850000 850000) ||
	bad "write the file of 100 MiB pages"
expect_run "a page of 81 MiB of strings is indexed" 0 "" \
	-- shardfs-index "$T/big" --quiet
# bigcheck OPTIONS EXPECTED: mount, compare every file's rows (EXPECTED:
# what views_md5.mjs says of each reader), audit
bigcheck() {
	local M=$T/m out
	mount_view "$T/big" "$M" "$1" || { bad "mount $T/big $1"; return; }
	out=$(cd "$npmdir" && node views_md5.mjs "$M" "$T/big" 2>&1)
	expect_eq "big pages $1: every file's rows and bytes" \
		"${out//$M\//}" "$2"
	out=$(shardfs-check view "$M")
	expect_eq "big pages $1: the auditor passes" "$?:$(echo "$out" | tail -1)" "$PASS" ||
		echo "$out" >&2
	unmount_view "$M"
}
# 850 000 rows padded to 6 x 141 667: the last reader's 2 rows of padding
# are a second file
bigcheck world=3,workers=2 "$(for t in 0/0 0/1 1/0 1/1 2/0; do
	echo "$t: 1 files, 141667 rows as planned"; done
	echo "2/1: 2 files, 141667 rows as planned")"
bigcheck world=4,workers=2,start=777,symlinks=0,remainder=drop \
	"$(for r in 0 1 2 3; do for w in 0 1; do
		echo "$r/$w: 1 files, 106152 rows as planned"; done; done)"
# cut into 850 blocks (block=1000: every slice cuts the row group's four
# pages, 187 MiB decoded), the next epoch's view built ahead once the
# first is served: both builds' pages and both views' kept slices are
# within the daemon's one bound (slice.h, sfs_slice_mem), its peak under
# the 256 MB of DESIGN.md ("Scale"); 345 MiB when each build had a bound
# of its own and each view its slices beside.  Not in a sanitizer build.
# The slices past the views' memory (most of them) are kept in a file
# of the daemon's in TMPDIR, with no name: every file read has its
# slice read back, none laid out again (a decode of the row group's four
# pages each, about a second), and the daemon's peak stays under 256 MB.
M=$T/m
mkdir "$T/spill"
TMPDIR=$T/spill mount_view "$T/big" "$M" world=3,workers=2,block=1000 ||
	bad "mount $T/big block=1000"
for i in $(seq 600); do
	grep -q '"ahead": *[0-9]' "$M/.shardfs/status" && break
	sleep 0.1
done
expect_eq "big pages block=1000: the next epoch's view is built ahead" \
	"$(grep -o '"ahead": *[0-9][0-9]*' "$M/.shardfs/status" | tr -d ' ')" '"ahead":1'
peak=$(awk '/^VmHWM:/ { print int($2 / 1024) }' "/proc/${daemon_pid[$M]}/status")
if [ "$sanitized" == 1 ] || [ "$peak" -lt 256 ]; then ok; else
	bad "big pages block=1000, both views built: peak $peak MiB, over 256"
fi
cat "$M"/*/*/* > /dev/null || bad "read every file"
expect_eq "big pages block=1000: every slice opened, none laid out again" \
	"$(counter "$M" slices_laid_out) $(($(counter "$M" slices_spilled) > 700))" "0 1"
expect_eq "big pages block=1000: the file of slices has no name" \
	"$(ls -A "$T/spill")" ""
peak=$(awk '/^VmHWM:/ { print int($2 / 1024) }' "/proc/${daemon_pid[$M]}/status")
if [ "$sanitized" == 1 ] || [ "$peak" -lt 256 ]; then ok; else
	bad "big pages block=1000, every file read: peak $peak MiB, over 256"
fi
# their bytes are those of a daemon whose file stops early (a slice
# past it is laid out at open): its TMPDIR a tmpfs of 16 MiB (the
# view's file is about 31 MiB here), which the file leaves a tenth of
# free, and says so once
M2=$T/m2
mkdir "$T/spilltmp"
mounts+=("$T/spilltmp")
mount -t tmpfs -o size=16m tmpfs "$T/spilltmp" || bad "mount a tmpfs on $T/spilltmp"
TMPDIR=$T/spilltmp mount_view "$T/big" "$M2" world=3,workers=2,block=1000,ahead=0 ||
	bad "mount $T/big block=1000 with a small file of slices"
for f in $(ls "$M/2/1" | tail -3); do
	cmp "$M/2/1/$f" "$M2/2/1/$f" || bad "big pages block=1000: 2/1/$f differs"
done
free=$(df --output=avail -B1K "$T/spilltmp" | tail -1)
if [ "$free" -ge 1638 ]; then ok; else
	bad "the file of slices left $free KiB of 16 MiB free, under a tenth"
fi
expect_eq "big pages block=1000 with a small file of slices: some kept there" \
	"$(($(counter "$M2" slices_spilled) > 0))" 1
expect_eq "big pages block=1000 with a small file of slices: the log says so once" \
	"$(grep -c "$T/spilltmp: cannot grow the file of the laid-out slices that do not fit in memory (its file system would keep less than a tenth of its size free): the view's slices not kept are laid out again at each open (for Parquet's big pages, a decode each); set TMPDIR to a directory the daemon can write, with room" "${daemon_log[$M2]}")" 1
unmount_view "$M2"
umount "$T/spilltmp"
unmount_view "$M"

# shuffle=samples over many rows: refused at mount with the cost and the
# option to use instead (every row would be a row group of its own: a
# 16 M-row file was not served after minutes), never minutes of silence
shardfs-mkdata "$T/many" --format parquet --shards 1 --samples 5000 --size 1-8 > /dev/null
shardfs-index "$T/many" --quiet || bad "index the 5000-row file"
mkdir -p "$T/m"
expect_run "shuffle=samples, 1250 one-row pieces a reader: refused" 1 \
	"shardfs: shuffle=samples cuts the 5000 samples of $T/many's parquet shards (shard-000000.parquet, ...) into one-sample runs, each a row group of its own: about 1250 in each reader's files, more than 1024 (minutes to build, slow to read); use shuffle=units with block=N (units of N samples, shuffled each epoch; a loader's shuffle buffer mixes the samples inside them)" \
	-- shardfs "$T/many" "$T/m" -o world=2,workers=2,shuffle=samples
expect_eq "nothing mounted" "$(mountpoint -q "$T/m" && echo mounted)" ""

# a slice is laid out once, when the view is built (to size it), and
# served from that layout at its open: a shard changed after the build is
# refused at the open, never served from the layout; put back as indexed
# (bytes and mtime), its slices read as before
M=$T/m
mount_view "$T/mk" "$M" world=3,workers=1,shuffle=none || bad "mount mk"
f=$(find "$M"/1/0 -type f -name '*shard-000002*' | head -1)
expect_eq "a slice of shard-000002" "$(basename "$f" | grep -c '^[0-9]*-shard-000002\.[0-9]*-[0-9]*\.parquet$')" 1
cp -p "$T/mk/shard-000002.parquet" "$T/keep.parquet"
printf 'X' | dd of="$T/mk/shard-000002.parquet" bs=1 seek=100 conv=notrunc 2>/dev/null
expect_run "a shard changed after the view was built: its slice fails" 1 \
	"cat: $f: Input/output error" -- cat "$f"
expect_eq "the failure names the shard" \
	"$(grep -c "shard-000002.parquet changed since it was indexed (size $(stat -c %s "$T/keep.parquet"), the index says $(stat -c %s "$T/keep.parquet"), and a new mtime)" "${daemon_log[$M]}")" 1
cp -p "$T/keep.parquet" "$T/mk/shard-000002.parquet"
python3 -c 'import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)' "$f"
expect_eq "put back as indexed: the slice reads its bytes" "$(cat "$f" | wc -c)" "$(stat -c %s "$f")"
unmount_view "$M"
check "$T/mk" world=3,workers=1,shuffle=none

# row groups of no rows, as pyarrow writes an empty table (data_page_offset
# 0, and an empty dictionary page or no bytes): at the start, in the middle
# and at the end of a file, and a file of nothing else.  Indexed, left out
# of slices (cut inside and across row groups), served whole as symlinks
# and as files; pyarrow too reads every slice as planned
venv=$(bash "$TESTS/python/venv.sh" "$TESTS/python/requirements.txt") || {
	bad "build the pyarrow venv"
	finish
	exit
}
mkdir "$T/pa"
"$venv/bin/python" "$TESTS/mount/parquet_empty_groups.py" write "$T/pa" ||
	bad "write the pyarrow files"
expect_run "pyarrow's empty row groups are indexed" 0 "" \
	-- shardfs-index "$T/pa" --quiet
expect_eq "rows of the pyarrow files" \
	"$(shardfs-check plan "$T/pa" -o world=1 | grep -o '[0-9]* samples each')" \
	"190 samples each"
pa=$venv/bin/python
check "$T/pa" world=3,workers=2
check "$T/pa" world=2,workers=2,block=7,seed=5
check "$T/pa" world=3,workers=1,partition=interleaved,batch=5,start=11,block=45,symlinks=0
check "$T/pa" world=1,workers=1,shuffle=none
check "$T/pa" world=1,workers=1,shuffle=none,symlinks=0
check "$T/pa" world=2,workers=2,shuffle=samples,block=0,seed=3
pa=

# a switch sizes every Parquet slice from its shard's footer (on several
# threads past a thousand slices): a shard changed behind the index
# refuses the switch, names the shard, and the epoch stays; also when it
# changed after the next epoch's view was built ahead from it
shardfs-mkdata "$T/many" --format parquet --shards 4 --samples 600 --size 1-8 --seed 3 > /dev/null
shardfs-index "$T/many" --quiet || bad "index the many-slices files"
M=$T/m
mount_view "$T/many" "$M" world=1,workers=2,block=2 || bad "mount many slices"
expect_eq "many slices" "$(ls "$M"/0/*/ | grep -c 'parquet$')" 1200
for i in $(seq 100); do [ "$(counter "$M" ahead)" == 1 ] && break; sleep 0.1; done
expect_eq "epoch 1 is built ahead" "$(counter "$M" ahead)" 1
touch -d '2001-01-01' "$T/many/shard-000002.parquet"
expect_run "a changed shard refuses the switch" 1 \
	"bash: line 1: echo: write error: Invalid argument" \
	-- bash -c "echo 1 > '$M/.shardfs/epoch'"
expect_eq "the refusal names the shard" \
	"$(grep -c "refused epoch 1: shard-000002.parquet: the shard changed since it was indexed; rebuild the index with shardfs-index$" "${daemon_log[$M]}")" 1
expect_eq "the epoch stays" "$(cat "$M/.shardfs/epoch")" 0
expect_eq "the view built ahead was not taken" "$(counter "$M" switches_ahead)" 0
unmount_view "$M"

# bad files: the file, the byte, what is wrong
mkdir "$T/bad"
cp "$T/mk/shard-000000.parquet" "$T/bad/good.parquet"
printf 'PAR1 not a parquet file at all PAR1' > "$T/bad/junk.parquet"
expect_run "a file that is not Parquet" 2 \
	"shardfs-index: 1 shard could not be indexed: junk.parquet: byte 27: the footer length 543976545 is more than the file holds (23 bytes between the magics): truncated or not Parquet; fix or remove it, or run shardfs-index --skip-bad to index the rest" \
	-- shardfs-index "$T/bad" --quiet
rm "$T/bad/junk.parquet"
# the first value of column key (PLAIN) claims 65535 bytes
printf '\xff\xff' | dd of="$T/bad/good.parquet" bs=1 seek=24 conv=notrunc 2>/dev/null
expect_run "a malformed page" 2 \
	"shardfs-index: 1 shard could not be indexed: good.parquet: row group 0 column key: page at byte 4: malformed values (encoding 0, 16 values); fix or remove it, or run shardfs-index --skip-bad to index the rest" \
	-- shardfs-index "$T/bad" --quiet
# found by fuzz_parquet_page: a v2 page of a list column whose num_rows
# (7) is not the rows its levels begin (15) was indexed, then its cut
# failed; a cut trusts num_rows, so the index refuses it
rm "$T/bad/good.parquet"
cp "$TESTS/fuzz/corpus/parquet_page/v2-num-rows-disagree.parquet" "$T/bad/v2.parquet"
expect_run "a v2 page whose num_rows the levels contradict" 2 \
	"shardfs-index: 1 shard could not be indexed: v2.parquet: row group 1 column l.list.element: page at byte 716: num_rows says 7, the levels begin 15; fix or remove it, or run shardfs-index --skip-bad to index the rest" \
	-- shardfs-index "$T/bad" --quiet
finish
