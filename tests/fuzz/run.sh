#!/usr/bin/env bash
# Build the libFuzzer harnesses with clang (ASan + UBSan) and run each for
# SECONDS (default 60) on a scratch copy of its seed corpus, as many at
# once as there are CPUs.  A crash, a
# leak or a sanitizer report fails the run and leaves the input that caused
# it in build-fuzz/crashes/; turn it into a regression test.
# Usage: tests/fuzz/run.sh [SECONDS]
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
secs=${1:-60}
cd "$top"
CC=clang cmake -S . -B build-fuzz -DSHARDFS_FUZZ=ON -DSHARDFS_TESTS=OFF -DSHARDFS_WERROR=ON >/dev/null
harnesses="scan index options reports mixture parquet parquet_page lance_manifest lance_deletion lance_view follow"
# shellcheck disable=SC2046 # one word a target
cmake --build build-fuzz -j "$(nproc)" --target $(printf 'fuzz_%s ' $harnesses) >/dev/null
work=$(mktemp -d /tmp/shardfs-fuzz-XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir -p build-fuzz/crashes
# one harness: its status ("ok" or "failed") into $work/$1.status
fuzz_one() {
	local f=$1
	cp -r "tests/fuzz/corpus/$f" "$work/$f"
	if build-fuzz/fuzz_$f -max_total_time="$secs" -max_len=65536 \
		-artifact_prefix=build-fuzz/crashes/$f- "$work/$f" > "$work/$f.log" 2>&1; then
		echo ok > "$work/$f.status"
	else
		echo failed > "$work/$f.status"
	fi
}
# as many harnesses at once as there are CPUs, each for SECONDS
running=0
for f in $harnesses; do
	fuzz_one "$f" &
	running=$((running + 1))
	if [ "$running" -ge "$(nproc)" ]; then
		wait -n
		running=$((running - 1))
	fi
done
wait
failed=0
for f in $harnesses; do
	if [ "$(cat "$work/$f.status" 2>/dev/null)" = ok ]; then
		echo "fuzz_$f: $(grep -E '^#[0-9]+.*DONE' "$work/$f.log" | tail -1)"
	else
		failed=$((failed + 1))
		echo "fuzz_$f: FAILED"
		tail -40 "$work/$f.log"
	fi
done
echo "$(($(wc -w <<<"$harnesses") - failed)) passed, $failed failed"
[ "$failed" -eq 0 ]
