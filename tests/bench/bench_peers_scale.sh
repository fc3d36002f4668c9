#!/usr/bin/env bash
# shardfs against its peers at scale: preparation and start-up
# at N small samples, results in docs/benchmarks.md ("Against the peers").
# Usage: tests/bench/bench_peers_scale.sh N [RUNS]   (as root: it mounts)
#
# N samples (key "s%010d", 32 random bytes, an int label; 20000 for a quick
# check, 1000000, 10000000) come from one deterministic generator
# (tests/bench/peers/scale.py), never through tar files.  shardfs gets
# them as JSONL shards of 100 000 lines (written first, timed apart: its
# preparation is shardfs-index over what exists, with hashes and
# --no-hash); the peers get them through their own writers fed by the
# same generator: Streaming's MDSWriter (64 MB shards), litdata.optimize
# (2 workers, 64 MB chunks), datasets' from_generator + save_to_disk.
# Each preparation runs once: wall time, peak RSS (/usr/bin/time -v: the
# largest single process), metadata and data bytes.  Then each peer's
# index is loaded alone in one process (its heap: what grows with N),
# Streaming's partition of N samples is computed alone (no data needed),
# and RUNS (default 3) alternated rounds of start-up: rank 0 of world=2,
# a DataLoader of 2 workers, batch 256, 10 batches, timed from before the
# mount (shardfs) or the rank's start (peers) to the first batch, with the
# peak PSS of the rank's process tree and shardfs's daemon's peak RSS.
# Data under $BENCH_DIR (default /var/tmp/scale), removed at the end
# unless KEEP=1.
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
. "$top/tests/bench/lib.sh"
need /usr/bin/time python3
n=${1:?usage: bench_peers_scale.sh N [RUNS]}
runs=${2:-3}
bin=${BIN:-$top/build}
cmake -S "$top" -B "$bin" > /dev/null
cmake --build "$bin" -j 2 > /dev/null
req=$top/tests/bench/peers/requirements-scale.txt
venv=$(bash "$top/tests/python/venv.sh" "$req")
PY=$venv/bin/python
D=$top/tests/bench/peers/scale.py
B=${BENCH_DIR:-/var/tmp/scale}
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 HF_DATASETS_CACHE=$B/hf-cache
W=$B/$n
mnt=$B/mnt-$n
res=$B/results-$n.jsonl
mkdir -p "$W" "$mnt"
cleanup() {
	if mountpoint -q "$mnt"; then fusermount3 -u "$mnt"; fi
	rmdir "$mnt" 2> /dev/null || true
	[ -n "${KEEP:-}" ] || rm -rf --one-file-system "$W" "$B/hf-cache"
}
trap cleanup EXIT
: > "$res"
load() { awk '{print $1}' /proc/loadavg; }
echo "$n samples in $W; load average at start $(cut -d' ' -f1-3 /proc/loadavg)"

# prep WHAT DIR SYSTEM CMD...: run CMD once under /usr/bin/time -v and
# append its wall time, peak RSS and (when DIR is given) SYSTEM's bytes on
# disk to the results
prep() {
	local what=$1 dir=$2 sys=$3 t0 t1
	shift 3
	t0=$(date +%s.%N)
	/usr/bin/time -v -o "$W/time" "$@" > "$W/prep.log" 2>&1 ||
		{ echo "  $what failed:"; tail -5 "$W/prep.log"; return 0; }
	t1=$(date +%s.%N)
	"$PY" "$D" record "$what" "$W/time" \
		"$(awk "BEGIN {printf \"%.3f\", $t1 - $t0}")" \
		--n "$n" ${dir:+--system "$sys" --dir "$dir"} | tee -a "$res"
}

rm -rf "${W:?}"/*
prep generator "" "" "$PY" "$D" gen "$n"
prep jsonl "" "" "$PY" "$D" jsonl "$W/jsonl" "$n"
prep "shardfs-index --no-hash" "$W/jsonl" shardfs \
	"$bin/shardfs-index" "$W/jsonl" --no-hash --quiet
rm -rf "$W/jsonl/.shardfs"
prep shardfs-index "$W/jsonl" shardfs "$bin/shardfs-index" "$W/jsonl" --quiet
prep mds "$W/mds" streaming "$PY" "$D" convert mds "$W/mds" "$n"
prep litdata "$W/litdata" litdata "$PY" "$D" convert litdata "$W/litdata" "$n"
prep arrow "$W/arrow" hf "$PY" "$D" convert arrow "$W/arrow" "$n"
du -sh "$W"/* | sed 's/^/  /'

data() { # data SYSTEM: the directory SYSTEM reads
	case $1 in
	shardfs) echo "$W/jsonl" ;; streaming) echo "$W/mds" ;;
	litdata) echo "$W/litdata" ;; hf) echo "$W/arrow" ;;
	esac
}
for s in streaming litdata hf; do
	[ -e "$(data $s)" ] || continue
	"$PY" "$D" load "$s" "$(data $s)" --n "$n" 2> "$W/load.log" |
		tail -1 >> "$res" ||
		{ echo "  load $s failed"; tail -3 "$W/load.log"; }
done
# what Streaming's local leader computes before the first sample, alone
"$PY" "$D" partition "$n" 2> /dev/null | tail -1 >> "$res"
for r in $(seq "$runs"); do
	for s in shardfs streaming litdata hf; do
		[ -e "$(data $s)" ] || continue
		extra=()
		[ "$s" != shardfs ] || extra=(--mount "$bin/shardfs,$mnt")
		"$PY" "$D" start "$s" "$(data $s)" "$res" --n "$n" "${extra[@]}" \
			> "$W/start.log" 2>&1 ||
			{
				echo "  start $s round $r failed:"
				grep -E 'Error|error' "$W/start.log" | sort | uniq -c | head -5
			}
		echo "  round $r $s: $(tail -1 "$W/start.log" | cut -c1-150)"
		echo "    load $(load)"
	done
done
echo "machine: $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB;" \
	"load average at end $(cut -d' ' -f1-3 /proc/loadavg)"
cp "$res" "$B/results-$n-$(date +%Y%m%d-%H%M%S).jsonl"
"$PY" "$D" report "$res"
