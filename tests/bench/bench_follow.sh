#!/usr/bin/env bash
# follow=1, results in docs/benchmarks.md ("follow=1: a source that grows"):
#   - latency: a reader blocks in a read of stream.jsonl; a chunk of one
#     window's samples is renamed into the source; the time from the
#     rename to the read's return (median, p99 per run).  With inotify
#     (the source on the local disk) and with polling only: the source
#     seen through tests/bench/slowfs.c (a pass-through FUSE mount, no
#     added latency, kernel caches off), as a network file system is: the
#     producer writes to the directory under it, of which inotify on the
#     FUSE mount sees nothing, so the daemon finds chunks only by listing
#     every follow_interval=1 s.
#   - throughput: stream.jsonl of a finished source (world=1, workers=1)
#     against the same chunks read directly, 1 MiB reads, warm page cache.
#   - memory: the daemon's RSS after CHUNKS chunks (10 000) renamed as
#     fast as Python can while a reader reads the stream along, against
#     its RSS over the empty source and a plain mount (no follow) of the
#     same chunks indexed by shardfs-index.
# Every figure is the median of RUNS runs; ratios are against baselines
# measured in the same run.
# Usage: [BIN=BUILD] tests/bench/bench_follow.sh [RUNS [CHUNKS]]   (as root)
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
. "$top/tests/bench/lib.sh"
need python3 fusermount3
runs=${1:-5}
nchunks=${2:-$(bench_size 10000 200)}
bin=${BIN:-$top/build}
cmake -S "$top" -B "$bin" >/dev/null && cmake --build "$bin" -j "$(nproc)" >/dev/null
PY=/usr/bin/python3
BF="$PY $top/tests/bench/bench_follow.py"
mkdir -p "${BENCH_DIR:-/tmp/shardfs-bench}"
B=$(mktemp -d "${BENCH_DIR:-/tmp/shardfs-bench}/follow-XXXXXX")
mounts=()
trap bench_cleanup EXIT
rss_kb() { awk '/^VmRSS/ {print $2}' "/proc/$1/status"; }
col() { awk -v c="$1" '{print $c}'; }

echo "== latency, rename to readable (ms; median of $runs runs of the per-run figure)"
# lat_runs NAME CHUNKS: $lat_mode's runs (not in a subshell: the mounts
# must stay in $mounts for cleanup)
lat_runs() {
	local name=$1 n=$2 r med=() p99=() line
	for r in $(seq "$runs"); do
		"$lat_mode" "$n" >"$B/lat.out"
		line=$(tail -1 "$B/lat.out")
		med+=("$(col 2 <<<"$line")")
		p99+=("$(col 3 <<<"$line")")
	done
	printf '%s: median %s ms, p99 %s ms (%s chunks per run)\n' "$name" \
		"$(printf '%s\n' "${med[@]}" | median)" \
		"$(printf '%s\n' "${p99[@]}" | median)" "$n"
}
lat_once_inotify() {
	local d=$B/lat-$RANDOM
	mkdir -p "$d/src"
	bench_mount "$bin/shardfs" "$d/src" "$d/m" "follow=1,format=jsonl,window=16,follow_timeout=60"
	local p=$pid
	$BF latency "$d/m/0/0" "$d/src" "$1" 16 0.02
	bench_umount "$d/m" "$p"
}
lat_once_poll() {
	local d=$B/lat-$RANDOM
	mkdir -p "$d/under"
	bench_mount "$bin/tests/slowfs" "$d/under" "$d/slow" "latency=0,timeout=0"
	local sp=$pid
	bench_mount "$bin/shardfs" "$d/slow" "$d/m" "follow=1,format=jsonl,window=16,follow_timeout=60,follow_interval=1"
	local p=$pid
	$BF latency "$d/m/0/0" "$d/under" "$1" 16 1.0
	bench_umount "$d/m" "$p"
	bench_umount "$d/slow" "$sp"
}
lat_mode=lat_once_inotify lat_runs "inotify (local ext4)" "$(bench_size 200 20)"
lat_mode=lat_once_poll lat_runs "polling (follow_interval=1, through slowfs)" "$(bench_size 20 3)"

echo "== throughput: stream.jsonl of a finished source against the chunks read directly"
tc=$(bench_size 100 10)
ts=$(bench_size 5000 500)
mkdir -p "$B/tp"
$PY - "$B/tp" "$tc" "$ts" <<EOF
import random, sys
sys.path.insert(0, "$top/tests/mount/follow")
import follow_lib as L
rng = random.Random(3)
for c in range(int(sys.argv[2])):
    data, _ = L.chunk_bytes("jsonl", c, int(sys.argv[3]), rng)
    L.write_chunk(sys.argv[1], L.chunk_name(c, "jsonl"), data)
open(sys.argv[1] + "/.shardfs-end", "w").close()
EOF
bench_mount "$bin/shardfs" "$B/tp" "$B/tp-m" "follow=1,format=jsonl,window=$ts,follow_timeout=60"
tpid=$pid
$BF read "$B/tp-m/0/0/stream.jsonl" >/dev/null # warm: the daemon indexed at mount
$BF read "$B"/tp/chunk_*.jsonl >/dev/null
direct=() stream=()
for r in $(seq "$runs"); do
	d=$($BF read "$B"/tp/chunk_*.jsonl)
	s=$($BF read "$B/tp-m/0/0/stream.jsonl")
	[ "$(col 2 <<<"$d")" = "$(col 2 <<<"$s")" ] ||
		echo "warning: the stream holds $(col 2 <<<"$s") bytes, the chunks $(col 2 <<<"$d")"
	direct+=("$(awk '{printf "%.3f", $2 / $3 / 1e9}' <<<"$d")")
	stream+=("$(awk '{printf "%.3f", $2 / $3 / 1e9}' <<<"$s")")
done
dm=$(printf '%s\n' "${direct[@]}" | median)
sm=$(printf '%s\n' "${stream[@]}" | median)
echo "direct: $dm GB/s, stream.jsonl: $sm GB/s ($(col 2 <<<"$d") bytes, $tc chunks)"
echo "stream / direct: $(ratio "$sm" "$dm")"
bench_umount "$B/tp-m" "$tpid"

echo "== memory after $nchunks chunks"
mkdir -p "$B/rss"
bench_mount "$bin/shardfs" "$B/rss" "$B/rss-m" "follow=1,format=jsonl,window=100,follow_timeout=600"
rp=$pid
r0=$(rss_kb "$rp")
out=$($BF produce "$B/rss-m/0/0" "$B/rss" "$nchunks" 10 100)
r1=$(rss_kb "$rp")
hwm=$(awk '/^VmHWM/ {print $2}' "/proc/$rp/status")
touch "$B/rss/.shardfs-end"
bench_umount "$B/rss-m" "$rp"
"$bin/shardfs-index" "$B/rss" --no-hash --quiet
bench_mount "$bin/shardfs" "$B/rss" "$B/rss-s" "world=1,workers=1"
sp=$pid
cat "$B/rss-s/0/0/"* >/dev/null
r2=$(rss_kb "$sp")
bench_umount "$B/rss-s" "$sp"
echo "chunks written in $(col 2 <<<"$out") s, all readable $(col 3 <<<"$out") s after the first"
echo "follow RSS: empty $r0 KB, after $nchunks chunks $r1 KB (peak $hwm KB)"
echo "plain mount of the same chunks: $r2 KB; follow / plain: $(ratio "$r1" "$r2")"
echo "per chunk: $(awk -v a="$r1" -v b="$r0" -v n="$nchunks" 'BEGIN {printf "%.0f", (a - b) * 1024 / n}') bytes"
