#!/usr/bin/env bash
# Build the libFuzzer harnesses with clang (ASan + UBSan) and run each for
# SECONDS (default 60) on a scratch copy of its seed corpus.  A crash, a
# leak or a sanitizer report fails the run and leaves the input that caused
# it in build-fuzz/crashes/; turn it into a regression test.
# Usage: tests/fuzz/run.sh [SECONDS]
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
secs=${1:-60}
cd "$top"
CC=clang cmake -S . -B build-fuzz -DSHARDFS_FUZZ=ON -DSHARDFS_TESTS=OFF -DSHARDFS_WERROR=ON >/dev/null
cmake --build build-fuzz -j "$(nproc)" --target fuzz_scan fuzz_index fuzz_options fuzz_reports fuzz_mixture fuzz_parquet fuzz_parquet_page fuzz_lance_manifest fuzz_lance_deletion fuzz_lance_view fuzz_follow >/dev/null
work=$(mktemp -d /tmp/shardfs-fuzz-XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir -p build-fuzz/crashes
failed=0
harnesses="scan index options reports mixture parquet parquet_page lance_manifest lance_deletion lance_view follow"
for f in $harnesses; do
	cp -r "tests/fuzz/corpus/$f" "$work/$f"
	if build-fuzz/fuzz_$f -max_total_time="$secs" -max_len=65536 \
		-artifact_prefix=build-fuzz/crashes/$f- "$work/$f" > "$work/$f.log" 2>&1; then
		echo "fuzz_$f: $(grep -E '^#[0-9]+.*DONE' "$work/$f.log" | tail -1)"
	else
		failed=$((failed + 1))
		echo "fuzz_$f: FAILED"
		tail -40 "$work/$f.log"
	fi
done
echo "$(($(wc -w <<<"$harnesses") - failed)) passed, $failed failed"
[ "$failed" -eq 0 ]
