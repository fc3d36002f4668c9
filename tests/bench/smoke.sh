#!/usr/bin/env bash
# Every benchmark once, on tiny data (BENCH_SMOKE=1: lib.sh's bench_size),
# as CI runs them: each script must run to its end and print its result
# lines. The numbers mean nothing at this size; the measured ones are in
# docs/benchmarks.md and docs/scaling.md. About a minute; as root (the
# benchmarks mount).
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top"
BENCH_DIR=$(mktemp -d /tmp/shardfs-bench-smoke-XXXXXX)
export BENCH_SMOKE=1 BENCH_DIR
trap 'rm -rf --one-file-system "$BENCH_DIR"' EXIT
failed=0

# run NAME LINE CMD...: CMD exits 0 and prints a line starting with LINE
run() {
	local name=$1 want=$2 out
	shift 2
	if out=$("$@" 2>&1) && grep -q "^$want" <<< "$out"; then
		echo "ok: $name"
	else
		echo "FAIL: $name (wanted a line starting \"$want\")"
		tail -20 <<< "$out"
		failed=1
	fi
}

b=tests/bench
# every command the benchmarks call, named at once when one is missing
. $b/lib.sh
need fio /usr/bin/time node npm python3 sha256sum s3fs rclone curl
run bench_index "plan world=64 workers=8 shuffle=samples" bash $b/bench_index.sh 200 10 1
run bench_read "cached readlink: view" bash $b/bench_read.sh 1
run bench_check "audit rate / cat rate:" bash $b/bench_check.sh 1
run bench_slow "  last view with prefetch=1: prefetched" bash $b/bench_slow.sh 1
run bench_open "shardfs interleaved rank 0" bash $b/bench_open.sh 1 16
run bench_ddp "shardfs, interleaved batches" bash $b/bench_ddp.sh 1 16
run bench_mixture "mix.json: mount to ready" bash $b/bench_mixture.sh 100000 1
run bench_parquet "through the mount" bash $b/bench_parquet.sh 20000 1
run bench_parquet_mem "median of 1:" bash $b/bench_parquet_mem.sh 1 20000 3
run bench_lance "scan-4000, contiguous, symlinks=0:" bash $b/bench_lance.sh --smoke
run bench_scale "samples: ready" bash $b/bench_scale.sh 20 1
run bench_mount_slow "20 shards, 1 ms a request: mount to ready" bash $b/bench_mount_slow.sh
run bench_follow "stream / direct:" bash $b/bench_follow.sh 1
run bench_peers "| shardfs, symlinks=1 |" bash $b/bench_peers.sh
run bench_s3 "| shardfs, symlinks=1 | 2 (warm) |" bash $b/bench_s3.sh
exit "$failed"
