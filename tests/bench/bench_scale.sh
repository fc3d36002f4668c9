#!/usr/bin/env bash
# The daemon at scale (docs/scaling.md; docs/benchmarks.md, "Epoch
# switches" and "Scale"): rank 0 of world=64 x workers=8, block=BLOCK
# [100], on a generated dataset of SHARDS x 5000
# samples in FORMAT [jsonl] (default 20 000 shards: 100 M samples, 5 GB,
# ~1 min to make, kept under $BENCH_DIR; FORMAT=tfrecord takes 24 B a
# sample, 1 B samples in 24 GB), indexed with --no-hash. For shuffle none, units
# and samples: mount to ready (median of 3); the switch to the next epoch
# (median of 5) and to another epoch (median of 5: 105, 205, ..., built at
# the switch), each 1 s after the last (as when an epoch of training has
# passed) and once the next epoch's view is built ahead; the daemon's peak RSS after the switches; ROUNDS
# rounds, the median of each. With BASE=DIR (another build tree, e.g. of an older commit) the
# same figures of its binaries, measured alternately in the same rounds,
# and the ratio of this build's to the base's.  WALK=1: before each switch,
# every name of rank 0 is looked up (find), as the readers of an epoch of
# training leave them, so the switch also has the old view's entries to
# let go.  SHUFFLES: the shuffles measured [none units samples].
# Usage: [BASE=DIR] [WALK=1] [SHUFFLES=...] tests/bench/bench_scale.sh [SHARDS [ROUNDS]]
# (as root: it mounts)
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
. "$top/tests/bench/lib.sh"
shards=${1:-20000}
rounds=${2:-3}
format=${FORMAT:-jsonl}
block=${BLOCK:-100}
bin=$top/build
cmake -S "$top" -B "$bin" >/dev/null && cmake --build "$bin" -j "$(nproc)" >/dev/null
B=${BENCH_DIR:-/tmp/shardfs-bench}/scale-$shards${FORMAT:+-$format}
if [ ! -f "$B/idx/manifest.json" ]; then
	echo "generating $shards $format shards of 5000 samples in $B"
	rm -rf "$B"
	mkdir -p "$B"
	"$bin/shardfs-mkdata" "$B/src" --format "$format" --shards "$shards" \
		--samples 5000 --size 8 --seed 1 >/dev/null
	"$bin/shardfs-index" "$B/src" --no-hash --quiet --out "$B/idx"
fi

m=$B/mnt
cleanup() { mountpoint -q "$m" && fusermount3 -u "$m"; return 0; }
trap cleanup EXIT
mkdir -p "$m"
switch_to() { echo "$1" > "$m/.shardfs/epoch"; }

# 1 s (with WALK=1, a walk of rank 0's tree too), then until the view of
# epoch $1 is built ahead (5 s at most); no more when the build builds
# none (the status of a base too old has no "ahead")
await_ahead() {
	local i
	[ "${WALK:-0}" = 1 ] && find "$m/0" >/dev/null
	sleep 1
	grep -q '"ahead":' "$m/.shardfs/status" || return 0
	for i in $(seq 100); do
		grep -q "\"ahead\": $1,\?\$" "$m/.shardfs/status" && return 0
		sleep 0.05
	done
}

# one BIN SHUFFLE: "READY NEXT OTHER PEAK_KB" of one round
one() {
	local opts=rank=0,world=64,workers=8,block=$block,shuffle=$2,index=$B/idx
	local ready sw jump pid rss
	ready=$(for r in 1 2 3; do
		timed "$1/shardfs" "$B/src" "$m" -o "$opts"
		fusermount3 -u "$m"
	done | median)
	"$1/shardfs" "$B/src" "$m" -o "$opts"
	pid=$(pgrep -n -f "shardfs $B/src $m")
	sw=$(for e in 1 2 3 4 5; do
		await_ahead "$e"
		timed switch_to "$e"
	done | median)
	jump=$(for e in 105 205 305 405 505; do
		await_ahead $((e - 99))
		timed switch_to "$e"
	done | median)
	rss=$(awk '/VmHWM/ {print $2}' "/proc/$pid/status")
	fusermount3 -u "$m"
	echo "$ready $sw $jump $rss"
}

builds=("$bin")
[ -n "${BASE:-}" ] && builds+=("$BASE")
out=$B/rounds.txt
: > "$out"
shuffles=${SHUFFLES:-none units samples}
for r in $(seq "$rounds"); do
	for shuffle in $shuffles; do
		for b in "${builds[@]}"; do
			echo "$b $shuffle $(one "$b" "$shuffle")" >> "$out"
		done
	done
done

# col B SHUFFLE N: the median over rounds of field N
col() { awk -v b="$1" -v s="$2" -v n="$3" '$1 == b && $2 == s {print $n}' "$out" | median; }
echo "rank 0 of 64 x 8, block=$block, $format, $((shards * 5000)) samples, medians of $rounds rounds${WALK:+, WALK=$WALK}"
for shuffle in $shuffles; do
	line="$shuffle: ready $(col "$bin" "$shuffle" 3)s, switch next $(col "$bin" "$shuffle" 4)s, other $(col "$bin" "$shuffle" 5)s, peak RSS $(col "$bin" "$shuffle" 6) KB"
	if [ -n "${BASE:-}" ]; then
		line="$line; base: ready $(col "$BASE" "$shuffle" 3)s, switch next $(col "$BASE" "$shuffle" 4)s, other $(col "$BASE" "$shuffle" 5)s, peak RSS $(col "$BASE" "$shuffle" 6) KB"
		line="$line; ratio switch next $(ratio "$(col "$bin" "$shuffle" 4)" "$(col "$BASE" "$shuffle" 4)"), other $(ratio "$(col "$bin" "$shuffle" 5)" "$(col "$BASE" "$shuffle" 5)"), peak $(ratio "$(col "$bin" "$shuffle" 6)" "$(col "$BASE" "$shuffle" 6)")"
	fi
	echo "$line"
done
