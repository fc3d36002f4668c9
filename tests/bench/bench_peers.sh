#!/usr/bin/env bash
# shardfs against its peers, results in docs/benchmarks.md.
# Usage: tests/bench/bench_peers.sh [IMAGES [SMALL [RUNS]]]   (as root: it
# mounts and drops caches)
#
# The same samples, written once as tar shards (32 shards cut at a byte
# size, so their counts differ): IMAGES image-like samples of 8-200 KB
# (default 20000, 2 GB) and SMALL records of 100-1000 bytes (default
# 200000; 0 skips a set), each a .bin and a .cls label.  Each peer's own
# format is converted from them with its own writer (MosaicML Streaming
# MDSWriter, litdata.optimize, datasets from_generator + save_to_disk),
# then read by the same DDP-shaped job (tests/bench/peers/peers.py: 2 rank
# processes in a gloo group, a DataLoader of 2 workers each, batch 32 for
# images and 256 for records, decode-free: key, bytes, label) through
# shardfs (symlinks=1 and 0, one mount per rank), Streaming, LitData,
# WebDataset (split_by_node, split_by_worker, with_epoch) and datasets
# (split_dataset_by_node; map-style and IterableDataset).  RUNS (default 3)
# rounds, every system once a round in turn; then RESUME_RUNS (default 1)
# rounds of a resume to the middle of the epoch, COLD_RUNS (default 1)
# rounds after dropping the page cache, and SLOW_RUNS (default 1) cold
# rounds with every system's data read through tests/bench/slowfs.c at
# SLOW_MS (default 2) ms a request, slow storage such as a network file
# system.  peers.py report prints the medians and ratios.
#
# The peers run in a venv over Debian's python3-torch 1.13, pinned in
# tests/bench/peers/requirements.txt, made once by tests/python/venv.sh
# (about 90 s, offline from its wheel cache after the first time).  Under BENCH_SMOKE=1 (smoke.sh): 200
# image samples, one round, no resume or cold rounds, no conversions:
# shardfs and WebDataset (which reads the tars) if the peers' venv is
# already there, else shardfs alone (CI does not install the venv).
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
. "$top/tests/bench/lib.sh"
images=${1:-$(bench_size 20000 200)}
small=${2:-$(bench_size 200000 0)}
runs=${3:-$(bench_size 3 1)}
cold_runs=${COLD_RUNS:-$(bench_size 1 0)}
resume=${RESUME_RUNS:-$(bench_size 1 0)}
slow_runs=${SLOW_RUNS:-$(bench_size 1 0)}
bin=$top/build
cmake -S "$top" -B "$bin" >/dev/null && cmake --build "$bin" -j "$(nproc)" >/dev/null
D=$top/tests/bench/peers/peers.py
req=$top/tests/bench/peers/requirements.txt
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1
export HF_DATASETS_CACHE=${BENCH_DIR:-/var/tmp/peers}/hf-cache
# the smoke never installs: it uses the environment if a run made it
if [ -n "${BENCH_SMOKE:-}" ]; then
	venv=$(bash "$top/tests/python/venv.sh" --built "$req") || venv=
else
	venv=$(bash "$top/tests/python/venv.sh" "$req")
fi
if [ -n "$venv" ]; then
	PY=$venv/bin/python
	systems="links slices streaming litdata wds hf_map hf_stream"
	# the smoke skips the conversions (half a minute even on tiny data)
	[ -z "${BENCH_SMOKE:-}" ] || systems="links slices wds"
else
	PY=/usr/bin/python3
	systems="links slices"
	echo "no peers' venv: shardfs only"
fi
B=${BENCH_DIR:-/var/tmp/peers}
mkdir -p "$B"
work=$(mktemp -d "$B/run-XXXXXX")
# slowfs over $B, mounted outside it: a mount inside its own source would
# be walked through itself
slow=$(mktemp -d /tmp/peers-slow-XXXXXX)
mnts=("$slow")
for s in links slices; do for r in 0 1; do mnts+=("$work/m-$s-$r" "$work/m-r$s-$r"); done; done
cleanup() {
	local m
	for m in "${mnts[@]}"; do
		if mountpoint -q "$m"; then fusermount3 -u "$m"; fi
	done
	rm -rf --one-file-system "$work"
	rmdir "$slow"
}
trap cleanup EXIT
can_drop=1
echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || can_drop=0
[ "$can_drop" = 1 ] || { echo "cannot drop caches here: no cold rounds"; cold_runs=0 slow_runs=0; }
res=$work/results.jsonl prep=$work/prep

root=$B # where the jobs read the data: $B, or slowfs over it
data() { # data SYSTEM TAG: the directory SYSTEM reads
	case $1 in
	streaming) echo "$root/$2-mds" ;; litdata) echo "$root/$2-litdata" ;;
	hf_*) echo "$root/$2-arrow" ;; *) echo "$root/$2" ;;
	esac
}
job() { # job SYSTEM TAG N BATCH [ARGS...]
	local s=$1 tag=$2 n=$3 batch=$4 extra=()
	shift 4
	case $s in
	links | slices)
		local o=symlinks=1 m=m-$s start=0
		[ "$s" = slices ] && o=symlinks=0
		if [ "${1:-}" = --resume ]; then start=$((n / 2)) m=m-r$s; shift 2; fi
		extra=(--mount "$bin/shardfs,$root/$tag,$work/$m,world=2,workers=2,batch=$batch,$o,start=$start")
		;;
	wds) extra=(--wds-epoch $((n / 4))) ;;
	esac
	$PY "$D" job --system "$s" --data "$(data "$s" "$tag")" --out "$res" \
		--tag "$tag" --batch "$batch" "${extra[@]}" "$@" > "$work/last.log" 2>&1 ||
		{ echo "  $s $tag $*: failed, see below"; grep -E 'Error|error' "$work/last.log" | sort | uniq -c | head -5; }
}

bench() { # bench TAG KIND N BATCH
	local tag=$1 kind=$2 n=$3 batch=$4 r s f
	if [ ! -d "$B/$tag" ]; then
		echo "generating $n $kind samples in $B/$tag"
		$PY "$D" make "$B/$tag" --kind "$kind" --samples "$n"
	fi
	cat "$B/$tag"/*.tar > /dev/null
	# preparation: every tool from scratch, timed (once; the conversions
	# are minutes at the default size)
	rm -rf "$B/$tag/.shardfs"
	echo "$tag:shardfs-index $(timed "$bin/shardfs-index" "$B/$tag" --quiet)" >> "$prep"
	if [ -z "${BENCH_SMOKE:-}" ] && [ "$PY" != /usr/bin/python3 ]; then
		for f in mds litdata arrow; do
			rm -rf "${B:?}/$tag-$f"
			echo "$tag:$f $(timed $PY "$D" convert $f "$B/$tag" "$B/$tag-$f" 2>> "$work/convert.log")" >> "$prep"
		done
	fi
	for r in $(seq "$runs"); do
		for s in $systems; do job "$s" "$tag" "$n" "$batch"; done
	done
	for r in $(seq "$resume"); do
		for s in $systems; do
			case $s in
			links | slices) job "$s" "$tag" "$n" "$batch" --resume x ;;
			wds) ;; # no resume in WebDataset: nothing to measure
			*)
				job "$s" "$tag" "$n" "$batch" --stop-after $((n / 4 / batch)) \
					--save-state "$work/state-$s" --tag "stop-$tag"
				job "$s" "$tag" "$n" "$batch" --resume "$work/state-$s"
				;;
			esac
		done
	done
	for r in $(seq "$cold_runs"); do
		for s in $systems; do job "$s" "$tag" "$n" "$batch" --cold; done
	done
	[ "$slow_runs" -gt 0 ] || return 0
	"$bin/tests/slowfs" "$B" "$slow" -o "latency=${SLOW_MS:-2}"
	root=$slow
	for r in $(seq "$slow_runs"); do
		for s in $systems; do job "$s" "$tag" "$n" "$batch" --cold --slow; done
	done
	root=$B
	fusermount3 -u "$slow"
}
[ "$images" -gt 0 ] && bench "image-$images" image "$images" 32
[ "$small" -gt 0 ] && bench "small-$small" small "$small" 256
cp "$res" "$B/results-$(date +%Y%m%d-%H%M%S).jsonl"
echo "machine: $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB; peers: $PY"
$PY "$D" report "$res" --prep "$prep"
