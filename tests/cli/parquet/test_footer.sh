#!/usr/bin/env bash
# The Parquet footer module against independent writers and readers:
# DuckDB and parquet-wasm write files (tests/cli/parquet/write.mjs); for each,
# the footer as decoded here must agree exactly with DuckDB's
# parquet_metadata() and hyparquet; a footer rewritten in place must differ
# from the original by the page index and bloom filter fields only; and
# slices of whole row groups (chunks spliced, footer rewritten) must read
# back in DuckDB, hyparquet and parquet-wasm as exactly those row groups'
# rows (tests/cli/parquet/check.mjs).  The npm packages are pinned by
# tests/cli/parquet/package-lock.json and installed into the build directory.
# Usage: test_footer.sh BUILD_DIR TESTS_DIR
set -euo pipefail
BUILD=$1
TESTS=$2
tool=$BUILD/tests/parquet-footer
[ -x "$tool" ] || { echo "FAIL: $tool is not built"; exit 1; }
. "$TESTS/cli/parquet/npm.sh"
parquet_npm "$BUILD" "$TESTS"
T=$(mktemp -d /tmp/shardfs-parquet-XXXXXX)
trap 'rm -rf "$T"' EXIT
mkdir "$T/files"
node "$npmdir/write.mjs" "$T/files"
files=("$T"/files/*.parquet)
[ ${#files[@]} -eq 8 ] || { echo "FAIL: write.mjs wrote ${#files[@]} files, not 8"; exit 1; }

for f in "${files[@]}"; do
	"$tool" dump "$f" > "$T/dump.json"
	node "$npmdir/check.mjs" meta "$f" "$T/dump.json"
	"$tool" same "$f" "$T/same.parquet"
	node "$npmdir/check.mjs" same "$f" "$T/same.parquet"
	last=$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["row_groups"]) - 1)' "$T/dump.json")
	[ "$last" -ge 2 ] || { echo "FAIL: $f has $((last + 1)) row groups, the test wants 3 or more"; exit 1; }
	"$tool" slice "$f" "$T/slice.parquet" "$last" 0
	node "$npmdir/check.mjs" rows "$f" "$T/slice.parquet" "$last" 0
	"$tool" slice "$f" "$T/slice.parquet" 1
	node "$npmdir/check.mjs" rows "$f" "$T/slice.parquet" 1
done

# the comparison can fail: the last slice is row group 1, not 0
if node "$npmdir/check.mjs" rows "$f" "$T/slice.parquet" 0 > "$T/out" 2>&1; then
	echo "FAIL: a slice of row group 1 passed as row group 0"; exit 1
fi
grep -q "^FAIL: $T/slice.parquet: DuckDB rows: got" "$T/out" ||
	{ echo "FAIL: the wrong slice was not named:"; cat "$T/out"; exit 1; }

# and a truncated file is refused with the place and the reason
head -c -1 "$f" > "$T/cut.parquet"
size=$(stat -c %s "$T/cut.parquet")
if "$tool" dump "$T/cut.parquet" > /dev/null 2> "$T/err"; then
	echo "FAIL: a truncated file was read"; exit 1
fi
want="parquet-footer: $T/cut.parquet: byte $((size - 4)): no PAR1 magic at the end: not a Parquet file, or a truncated one"
[ "$(cat "$T/err")" = "$want" ] ||
	{ echo "FAIL: got '$(cat "$T/err")', want '$want'"; exit 1; }
echo "parquet footer: ${#files[@]} files from DuckDB and parquet-wasm agree; wrong slices and truncated files are refused"
