#!/usr/bin/env bash
# follow=1 against a plain view of the same data, results in
# docs/benchmarks.md ("follow=1: a source that grows"):
#   - read rate: stream.jsonl of a finished source (world=1, workers=1),
#     its window files, and the files of a plain view of the same chunks
#     (indexed by shardfs-index, symlinks=0 so that they are read through
#     the mount), 1 MiB reads (bench_follow.py read); warm (page cache
#     holding the chunks) and cold (the chunks' pages dropped before each
#     run with posix_fadvise(DONTNEED), which leaves the rest of the
#     machine's cache alone);
#   - mount-to-ready: from starting the daemon to the first listing of
#     0/0 that shows every file (the stream's windows laid out, the plain
#     view built).
# Every figure is the median of RUNS runs.
# Usage: [BIN=BUILD] tests/bench/bench_follow_read.sh [RUNS [CHUNKS]]  (as root)
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
. "$top/tests/bench/lib.sh"
need python3 fusermount3
runs=${1:-5}
nchunks=${2:-$(bench_size 64 4)}
bin=${BIN:-$top/build}
PY=/usr/bin/python3
BF="$PY $top/tests/bench/bench_follow.py"
mkdir -p "${BENCH_DIR:-/tmp/shardfs-bench}"
B=$(mktemp -d "${BENCH_DIR:-/tmp/shardfs-bench}/follow-read-XXXXXX")
mounts=()
trap bench_cleanup EXIT
col() { awk -v c="$1" '{print $c}'; }
gbs() { awk '{printf "%.3f", $2 / $3 / 1e9}'; }
# cold FILE...: drop the pages of FILE... from the page cache
cold() {
	$PY -c 'import os, sys
for p in sys.argv[1:]:
    fd = os.open(p, os.O_RDONLY)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)' "$@"
}

# chunks of 1024 lines of 4 KiB: 4 MiB each
src=$B/src
mkdir -p "$src"
$PY - "$src" "$nchunks" <<'EOF'
import json, os, sys
d, n = sys.argv[1], int(sys.argv[2])
for c in range(n):
    lines = b"".join((json.dumps({"id": "c%05d-%04d" % (c, i),
                                  "x": "x" * 4060}) + "\n").encode()
                     for i in range(1024))
    tmp = os.path.join(d, "chunk_%05d.jsonl.tmp" % c)
    with open(tmp, "wb") as f:
        f.write(lines)
    os.rename(tmp, tmp[:-4])
open(os.path.join(d, ".shardfs-end"), "w").close()
EOF
samples=$((nchunks * 1024))
window=$((samples / 8))
"$bin/shardfs-index" "$src" --no-hash --quiet

# ready OPTS MNT COUNT: seconds from the start to a listing of MNT/0/0
# with COUNT entries into $secs (the daemon left mounted, its pid in $pid)
ready() {
	local t0 t1 i
	t0=$(date +%s.%N)
	bench_mount "$bin/shardfs" "$src" "$2" "$1"
	for i in $(seq 2000); do
		[ "$(ls "$2/0/0" 2>/dev/null | wc -l)" -ge "$3" ] && break
		sleep 0.005
	done
	t1=$(date +%s.%N)
	secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.3f", b - a}')
}

fopts="follow=1,format=jsonl,window=$window,follow_timeout=60,world=1,workers=1"
popts="world=1,workers=1,symlinks=0"
fr=() pr=()
for r in $(seq "$runs"); do
	ready "$fopts" "$B/f$r" 9
	fr+=("$secs")
	bench_umount "$B/f$r" "$pid"
	ready "$popts" "$B/p$r" 1
	pr+=("$secs")
	bench_umount "$B/p$r" "$pid"
done
echo "== mount-to-ready (s, median of $runs): follow $(printf '%s\n' "${fr[@]}" | median), plain $(printf '%s\n' "${pr[@]}" | median) ($nchunks chunks, $samples samples)"

bench_mount "$bin/shardfs" "$src" "$B/fm" "$fopts"
fpid=$pid
bench_mount "$bin/shardfs" "$src" "$B/pm" "$popts"
ppid=$pid
stream=$B/fm/0/0/stream.jsonl
wins=("$B"/fm/0/0/window-*.jsonl)
plain=("$B"/pm/0/0/*)
$BF read "$stream" "${plain[@]}" "$src"/chunk_*.jsonl >/dev/null # warm
declare -A res
for mode in warm cold; do
	s=() w=() p=() d=()
	for r in $(seq "$runs"); do
		[ $mode = cold ] && cold "$src"/chunk_*.jsonl
		o=$($BF read "$stream")
		s+=("$(gbs <<<"$o")")
		bytes=$(col 2 <<<"$o")
		[ $mode = cold ] && cold "$src"/chunk_*.jsonl
		w+=("$($BF read "${wins[@]}" | gbs)")
		[ $mode = cold ] && cold "$src"/chunk_*.jsonl
		o=$($BF read "${plain[@]}")
		p+=("$(gbs <<<"$o")")
		[ "$(col 2 <<<"$o")" = "$bytes" ] ||
			echo "warning: the plain view holds $(col 2 <<<"$o") bytes, the stream $bytes"
		[ $mode = cold ] && cold "$src"/chunk_*.jsonl
		d+=("$($BF read "$src"/chunk_*.jsonl | gbs)")
	done
	res[$mode]="stream $(printf '%s\n' "${s[@]}" | median), windows $(printf '%s\n' "${w[@]}" | median), plain view $(printf '%s\n' "${p[@]}" | median), direct $(printf '%s\n' "${d[@]}" | median)"
	echo "== $mode read rate (GB/s, median of $runs, $bytes bytes): ${res[$mode]}"
done
bench_umount "$B/fm" "$fpid"
bench_umount "$B/pm" "$ppid"
