#!/usr/bin/env bash
# Install, build and run every test: the unit and command-line suites in a
# normal build and again under AddressSanitizer + UBSan, the formatting
# check, every benchmark once on tiny data, a short fuzzing run and the
# README's main job.  Run from anywhere; builds into build/ and build-asan/ of the tree.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
bash tests/install-deps.sh
jobs=$(nproc)
# what the tests' guards unmounted after a test was killed (tests/guard.sh)
export GUARD_LOG
GUARD_LOG=$(mktemp /tmp/shardfs-guard-XXXXXX)
guard_report() {
	sleep 2 # a guard acts within a second of its test's end
	if [ -s "$GUARD_LOG" ]; then
		echo "== mounts left by killed tests, unmounted by their guards"
		cat "$GUARD_LOG"
	fi
	rm -f "$GUARD_LOG"
}
trap guard_report EXIT

# a step's title, with the time since the start: the CI has a budget
step() { echo "== $1 (at $((SECONDS / 60)) min $((SECONDS % 60)) s)"; }

step "formatting (clang-format, .clang-format)"
files=$(git ls-files '*.c' '*.h' 2>/dev/null || find src include tests -name '*.[ch]')
clang-format --dry-run --Werror $files
echo "clang-format: $(echo "$files" | wc -w) files clean"

step "every build type with gcc and clang, warnings as errors"
bash tests/build-matrix.sh

for variant in build build-asan; do
	flags=(-DSHARDFS_WERROR=ON)
	[ "$variant" = build-asan ] && flags+=(-DSHARDFS_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug)
	step "$variant"
	cmake -S . -B "$variant" "${flags[@]}" >/dev/null
	cmake --build "$variant" -j "$jobs" >/dev/null
	ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
		ctest --test-dir "$variant" --output-on-failure -j "$jobs"
done

step "benchmarks, once each on tiny data (tests/bench/*.sh for real figures)"
bash tests/bench/smoke.sh

step "fuzzing, a short bounded run (tests/fuzz/run.sh SECONDS for longer)"
bash tests/fuzz/run.sh "${SHARDFS_FUZZ_SECONDS:-40}"

step "the README's main job"
bash tests/demo.sh
echo "== every test passed in $((SECONDS / 60)) min $((SECONDS % 60)) s"
