#!/usr/bin/env bash
# What one open costs through shardfs, results in docs/benchmarks.md
# ("Opens").  Usage: tests/bench/bench_open.sh [RUNS] [KIB]
# (as root: it mounts)
#
# Over the data set of bench_ddp.sh (32 tar shards of 4 MiB, KIB KiB
# samples, default 16), the microseconds per file of a loop of
# os.open / os.read(4096) / os.close over every slice of rank 0 of a
# partition=interleaved view (one file per batch of 32; a batch that is
# whole shards is a symlink, not counted), against the same
# loop over the source shards; each figure the median of RUNS passes
# (default 5) with warm caches.  The daemon's opens counter says how many
# OPEN requests reached it.
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
. "$top/tests/bench/lib.sh"
runs=${1:-5}
kib=${2:-16}
bin=$top/build
PY=/usr/bin/python3
cmake -S "$top" -B "$bin" >/dev/null && cmake --build "$bin" -j "$(nproc)" >/dev/null
src=$(ddp_shards "$kib")
mnt=$(mktemp -d /tmp/shardfs-bench-open-XXXXXX)
cleanup() {
	if mountpoint -q "$mnt"; then fusermount3 -u "$mnt"; fi
	rmdir "$mnt"
}
trap cleanup EXIT
"$bin/shardfs" "$src" "$mnt" -o rank=0,world=2,workers=2,batch=32,epoch=0,partition=interleaved

# opens: the daemon's opens counter
opens() { $PY -c 'import json,sys; print(json.load(open(sys.argv[1]))["counters"]["opens"])' "$mnt/.shardfs/status"; }

# loop DIR: microseconds per file of open/read/close over DIR's files
loop() {
	$PY - "$1" "$runs" <<'PY'
import os, sys, time
d, runs = sys.argv[1], int(sys.argv[2])
files = sorted(os.path.join(r, f) for r, _, fs in os.walk(d) for f in fs
               if f.endswith(".tar") and not os.path.islink(os.path.join(r, f)))
per = []
for _ in range(runs + 1):
    t = time.perf_counter()
    for p in files:
        fd = os.open(p, os.O_RDONLY)
        os.read(fd, 4096)
        os.close(fd)
    per.append((time.perf_counter() - t) / len(files) * 1e6)
per = sorted(per[1:])
print(len(files), "%.1f" % per[len(per) // 2])
PY
}
opens0=$(opens)
read -r nv v < <(loop "$mnt/0")
opens1=$(opens)
read -r ns s < <(loop "$src")
printf "open/read 4 KiB/close, median of %d warm passes\n" "$runs"
printf "source shards (%d files):              %6.1f us a file\n" "$ns" "$s"
printf "shardfs interleaved rank 0 (%d slices): %6.1f us a file, %d OPENs reached the daemon\n" \
	"$nv" "$v" $((opens1 - opens0))
