#!/usr/bin/env bash
# shardfs against its peers, results in docs/benchmarks.md ("Against the
# peers") and README's table.
# Usage: tests/bench/bench_peers.sh [IMAGES [SMALL [RUNS]]]   (as root: it
# mounts and drops caches)
#
# The same samples, written once as tar shards (32 shards cut at a byte
# size, so their counts differ): IMAGES image-like samples of 8-200 KB
# (default 4000, 400 MB) and SMALL records of 100-1000 bytes (default
# 50000; 0 skips a set), each a .bin and a .cls label.  From the tars, all
# fed by the shardfs package's tar reader: JSONL (the bytes in base64) and
# Parquet files, one per tar, that shardfs also serves and Ray Data reads;
# each peer's own format with its own writer (MosaicML Streaming MDSWriter,
# litdata.optimize with at least 4 chunks per reader, datasets
# from_generator + save_to_disk; Megatron-Energon's `energon prepare` over
# hard links of the tars).  A read-only pass over the tars with the
# same reader is timed too ("read" in the preparation lines).
#
# Each system is read by the same DDP-shaped job (tests/bench/peers/peers.py:
# 2 rank processes in a gloo group, a DataLoader of 2 workers each, batch 32
# for images and 256 for records, decode-free: key, bytes, label): shardfs
# (one mount per rank) over the tars read by the package's reader
# (symlinks=1 and 0) and by tarfile, over the JSONL and over the Parquet;
# WebDataset (split_by_node, split_by_worker, with_epoch) with tarfile and
# with the package's reader; Streaming; LitData; Ray Data (one driver,
# streaming_split(2, equal=True), a task per rank with iter_torch_batches,
# over the Parquet; its temporary directory under the run's own, not
# /tmp/ray); Megatron-Energon (get_train_dataset + get_loader, a
# WorkerConfig per rank); datasets (split_dataset_by_node; map-style and
# IterableDataset).  RUNS (default 3) rounds; a round is every system warm,
# then every system cold (page cache dropped), then every system cold on
# slow storage (tests/bench/slowfs.c over the data at SLOW_MS, default 2,
# ms a request; Streaming with remote= and a local cache, LitData with
# "local:" and a cache directory, both emptied per job), the systems in
# another order each round.  RESUME_RUNS (default 0) rounds of a resume to
# mid-epoch.  Every job records every reader's sample count, the CPU
# seconds of all its processes and the load average at its start.
# peers.py report prints the tables (rows whose readers got unequal counts
# marked UNEVEN), peers.py readme README's table.
#
# Three environments, all on PyPI's torch 2.15.0 (tests/python/venv.sh,
# cached): tests/bench/peers/requirements.txt (Streaming, LitData, Ray
# Data, WebDataset; it also runs shardfs's rows), the Python suites'
# tests/python/requirements.txt for datasets 5.2.0 (Streaming 0.13.0 needs
# transformers < 5, whose huggingface_hub < 1 datasets 5.2.0 refuses) and
# tests/bench/peers/requirements-energon.txt for Megatron-Energon 7.4.1
# (its s3fs pulls aiobotocore 3.10.0, whose botocore 1.43 the peers'
# boto3 1.44.8 refuses).
# Under BENCH_SMOKE=1 (smoke.sh): 200 image samples, one warm round, no
# conversions: shardfs and WebDataset if the peers' environment is already
# there, else shardfs alone with Debian's Python (CI does not install it).
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
. "$top/tests/bench/lib.sh"
images=${1:-$(bench_size 4000 200)}
small=${2:-$(bench_size 50000 0)}
runs=${3:-$(bench_size 3 1)}
resume=${RESUME_RUNS:-0}
cold=${COLD:-$(bench_size 1 0)} # cold and slow rounds too
bin=$top/build
cmake -S "$top" -B "$bin" >/dev/null && cmake --build "$bin" -j "$(nproc)" >/dev/null
D=$top/tests/bench/peers/peers.py
req=$top/tests/bench/peers/requirements.txt
reqhf=$top/tests/python/requirements.txt
reqen=$top/tests/bench/peers/requirements-energon.txt
B=${BENCH_DIR:-/var/tmp/peers}
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1
export HF_DATASETS_CACHE=$B/hf-cache RAY_USAGE_STATS_ENABLED=0
# the smoke never installs: it uses the environment if a run made it
if [ -n "${BENCH_SMOKE:-}" ]; then
	venv=$(bash "$top/tests/python/venv.sh" --built "$req") || venv=
	venvhf= venven=
else
	venv=$(bash "$top/tests/python/venv.sh" "$req")
	venvhf=$(bash "$top/tests/python/venv.sh" "$reqhf")
	venven=$(bash "$top/tests/python/venv.sh" "$reqen")
fi
if [ -n "$venv" ]; then
	PY=$venv/bin/python
	systems="links links_tarfile slices jsonl parquet wds wds_fast streaming litdata ray"
	[ -z "$venven" ] || systems="$systems energon"
	[ -z "$venvhf" ] || systems="$systems hf_map hf_stream"
	# the smoke skips the conversions (half a minute even on tiny data)
	[ -z "${BENCH_SMOKE:-}" ] || systems="links slices wds"
else
	PY=/usr/bin/python3
	systems="links slices"
	echo "no peers' venv: shardfs only"
fi
PYHF=${venvhf:+$venvhf/bin/python}
PYEN=${venven:+$venven/bin/python}
py() { # py SYSTEM: the Python that runs SYSTEM's job
	case $1 in
	hf_* | arrow) echo "$PYHF" ;; energon) echo "$PYEN" ;; *) echo "$PY" ;;
	esac
}
mkdir -p "$B"
work=$(mktemp -d "$B/run-XXXXXX")
# Ray's session folders (logs, sockets) in the run's own directory, removed
# with it, not in /tmp/ray (peers.py removes each job's; what /tmp/ray
# held before the run is compared with what it holds after)
export RAY_TMPDIR=$work/ray
mkdir "$RAY_TMPDIR"
tmpray=$(ls -A /tmp/ray 2>/dev/null || true)
# slowfs over $B, mounted outside it: a mount inside its own source would
# be walked through itself
slow=$(mktemp -d /tmp/peers-slow-XXXXXX)
mnts=("$slow")
for s in $systems; do for r in 0 1; do mnts+=("$work/m-$s-$r" "$work/m-r$s-$r"); done; done
cleanup() {
	local m
	for m in "${mnts[@]}"; do
		if mountpoint -q "$m"; then fusermount3 -u "$m"; fi
	done
	rm -rf --one-file-system "$work"
	rmdir "$slow"
}
trap cleanup EXIT
echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || {
	echo "cannot drop caches here: no cold rounds"
	cold=0
}
res=$work/results.jsonl prep=$work/prep

root=$B # where the jobs read the data: $B, or slowfs over it
data() { # data SYSTEM TAG: the directory SYSTEM reads
	case $1 in
	streaming) echo "$root/$2-mds" ;; litdata) echo "$root/$2-litdata" ;;
	hf_*) echo "$root/$2-arrow" ;; jsonl) echo "$root/$2-jsonl" ;;
	energon) echo "$root/$2-energon" ;;
	parquet | ray) echo "$root/$2-parquet" ;; *) echo "$root/$2" ;;
	esac
}
job() { # job SYSTEM TAG N BATCH [ARGS...]
	local s=$1 tag=$2 n=$3 batch=$4 extra=()
	shift 4
	case $s in
	links | links_tarfile | slices | jsonl | parquet)
		local o=symlinks=1 m=m-$s start=0
		[ "$s" = slices ] && o=symlinks=0
		if [ "${1:-}" = --resume ]; then start=$((n / 2)) m=m-r$s; shift 2; fi
		extra=(--mount "$bin/shardfs,$(data "$s" "$tag"),$work/$m,world=2,workers=2,batch=$batch,$o,start=$start")
		;;
	wds | wds_fast) extra=(--wds-epoch $((n / 4))) ;;
	esac
	"$(py "$s")" "$D" job --system "$s" --data "$(data "$s" "$tag")" \
		--out "$res" --tag "$tag" --batch "$batch" --timeout 300 "${extra[@]}" "$@" \
		> "$work/last.log" 2>&1 ||
		{ echo "  $s $tag $*: failed, see below"; grep -E 'Error|error' "$work/last.log" | sort | uniq -c | head -5; }
}

bench() { # bench TAG KIND N BATCH
	local tag=$1 kind=$2 n=$3 batch=$4 r s f order
	if [ ! -d "$B/$tag" ]; then
		echo "generating $n $kind samples in $B/$tag"
		$PY "$D" make "$B/$tag" --kind "$kind" --samples "$n"
	fi
	cat "$B/$tag"/*.tar > /dev/null
	# preparation: every tool from scratch, timed (once); shardfs's JSONL
	# and Parquet are its input, made here untimed, then indexed, timed
	rm -rf "$B/$tag/.shardfs"
	echo "$tag:shardfs-index $(timed "$bin/shardfs-index" "$B/$tag" --quiet)" >> "$prep"
	if [ -z "${BENCH_SMOKE:-}" ] && [ "$PY" != /usr/bin/python3 ]; then
		echo "$tag:read $(timed $PY "$D" convert read "$B/$tag" -)" >> "$prep"
		for f in jsonl parquet mds litdata arrow energon; do
			case $f in
			arrow) [ -n "$PYHF" ] || continue ;;
			energon) [ -n "$PYEN" ] || continue ;;
			esac
			rm -rf "${B:?}/$tag-$f"
			echo "$tag:$f $(timed "$(py $f)" "$D" convert $f "$B/$tag" "$B/$tag-$f" --samples "$n" 2>> "$work/convert.log")" >> "$prep"
		done
		for f in jsonl parquet; do
			echo "$tag:shardfs-index-$f $(timed "$bin/shardfs-index" "$B/$tag-$f" --quiet)" >> "$prep"
		done
	fi
	for r in $(seq "$runs"); do
		# every system once a mode, starting one further each round
		order=$(echo $systems | tr ' ' '\n' | awk -v r="$r" '{a[NR] = $0}
			END {for (i = 0; i < NR; i++) print a[(i + r - 1) % NR + 1]}')
		echo "$tag round $r: load average $(cut -d' ' -f1-3 /proc/loadavg)"
		for s in $order; do job "$s" "$tag" "$n" "$batch"; done
		[ "$cold" -gt 0 ] || continue
		echo "$tag round $r, cold: load average $(cut -d' ' -f1-3 /proc/loadavg)"
		for s in $order; do job "$s" "$tag" "$n" "$batch" --cold; done
		"$bin/tests/slowfs" "$B" "$slow" -o "latency=${SLOW_MS:-2}"
		root=$slow
		echo "$tag round $r, slow: load average $(cut -d' ' -f1-3 /proc/loadavg)"
		for s in $order; do
			case $s in
			streaming | litdata) job "$s" "$tag" "$n" "$batch" --cold --slow --cache ;;
			*) job "$s" "$tag" "$n" "$batch" --cold --slow ;;
			esac
		done
		root=$B
		fusermount3 -u "$slow"
	done
	for r in $(seq "$resume"); do
		for s in $systems; do
			case $s in
			links | slices) job "$s" "$tag" "$n" "$batch" --resume x ;;
			streaming | litdata | hf_*)
				job "$s" "$tag" "$n" "$batch" --stop-after $((n / 4 / batch)) \
					--save-state "$work/state-$s" --tag "stop-$tag"
				job "$s" "$tag" "$n" "$batch" --resume "$work/state-$s"
				;;
			esac
		done
	done
}
[ "$images" -gt 0 ] && bench "image-$images" image "$images" 32
[ "$small" -gt 0 ] && bench "small-$small" small "$small" 256
if [ "$(ls -A /tmp/ray 2>/dev/null || true)" != "$tmpray" ]; then
	echo "/tmp/ray changed during the run (Ray did not keep to RAY_TMPDIR):"
	ls -la /tmp/ray
fi
stamp=$(date +%Y%m%d-%H%M%S)
cp "$res" "$B/results-$stamp.jsonl"
cp "$prep" "$B/prep-$stamp"
echo "machine: $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB; peers: $PY${PYHF:+, datasets: $PYHF}${PYEN:+, Energon: $PYEN}"
echo "results: $B/results-$stamp.jsonl, $B/prep-$stamp (README's table:" \
	"$PY $D readme $B/results-$stamp.jsonl --prep $B/prep-$stamp --update README.md)"
$PY "$D" report "$res" --prep "$prep"
