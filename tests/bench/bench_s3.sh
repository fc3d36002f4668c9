#!/usr/bin/env bash
# Over S3: shardfs over a bucket mounted with s3fs, against MosaicML
# Streaming and LitData streaming the same samples from the same server;
# results in docs/benchmarks.md ("Over S3").
# Usage: tests/bench/bench_s3.sh [RUNS [SAMPLES [SHARDS]]]   (as root: it
# mounts)
#
# The server is the S3 test's versitygw (tests/mount/s3/versitygw.sh) on
# 127.0.0.1, with keep-alive, behind tests/mount/s3/delay_proxy.py, which adds
# DELAY_MS (default 10) ms to every connection and every request (this
# kernel has no netem) and counts requests and bytes.  SAMPLES (default
# 4096) image-like samples of 8-200 KB (.bin + .cls), cut into SHARDS
# (default 16) tar shards, are uploaded with boto3, and converted (not
# timed) to Streaming's MDS and LitData's chunks of the same size,
# uploaded beside them.  Then, RUNS (default 3) times:
#   - shardfs-index over a fresh s3fs mount of the bucket (read-only,
#     use_cache emptied), with and without --no-hash, --no-hash with 8
#     threads (--jobs 8; one per core by default), and --no-hash over
#     rclone mount (its default cache mode, off): time and requests;
#   - each system in turn, one DDP-shaped job of two epochs
#     (tests/mount/s3/bench_s3.py job: 2 ranks in a gloo group, DataLoaders of
#     2 workers, batch 32, decode-free): shardfs with symlinks=1 and
#     symlinks=0 (one view per rank, world=2,workers=2, prefetch at its
#     defaults) over a fresh s3fs mount (ro,use_cache,kernel_cache,
#     attr_timeout=3600,entry_timeout=3600: docs/deploy.md) whose use_cache
#     directory is emptied first, epoch 1 of the view served for the
#     second epoch;
#     Streaming (remote=s3://data/mds, local cache emptied first) and
#     LitData (s3://data/litdata, storage_options endpoint_url, cache_dir
#     emptied first), each iterating its loader twice.
# Per system and epoch: samples/s, CPU microseconds a sample (user+sys of
# the ranks and their DataLoader workers, and for shardfs of the views'
# daemons and s3fs: far steadier than the rate on a shared machine), time
# to the first batch (from the epoch's start: the dataset's construction
# and shardfs's mount of the views included, the import of a peer's
# package not), requests and bytes from the server (the proxy's
# counters), and for shardfs the views' prefetch (MB read from the
# source, MB skipped as already cached).  Medians of RUNS and the
# load average are printed by bench_s3.py report.
#
# The peers run in the venv of tests/mount/s3/requirements-bench.txt (torch 2,
# Streaming 0.13.0, LitData 0.2.76), made once by tests/python/venv.sh.
# While exploring: SYSTEMS= a subset of the four; S3FS_OPTIONS= replaces
# the s3fs options added to ro,use_cache (below); SHARDFS_OPTIONS= is added
# to the views' options; INDEX_RUNS=0 skips the indexer's last three
# runs (the first, shardfs-index --out DIR, makes the views' index);
# SHARDFS_BIN= runs the views' daemons through another program (a wrapper
# that execs strace -f -o LOG build/shardfs "$@", say); PROXY_LOG=FILE
# has the proxy write each request to FILE (delay_proxy.py), and each
# epoch's line of results its bounds ("span", Unix seconds) to match.
# Under BENCH_SMOKE=1 (smoke.sh): 200 samples in 4 shards, one run,
# shardfs with symlinks=1 alone, with Debian's python3 and torch 1.13.
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
. "$top/tests/bench/lib.sh"
runs=${1:-$(bench_size 3 1)}
samples=${2:-$(bench_size 4096 200)}
nshards=${3:-$(bench_size 16 4)}
delay=${DELAY_MS:-10}
need s3fs fusermount3 mountpoint curl
bin=$top/build
cmake -S "$top" -B "$bin" >/dev/null && cmake --build "$bin" -j "$(nproc)" >/dev/null
D=$top/tests/mount/s3/bench_s3.py
gw=$(bash "$top/tests/mount/s3/versitygw.sh")
s3venv=$(bash "$top/tests/python/venv.sh" "$top/tests/mount/s3/requirements-s3.txt")
req=$top/tests/mount/s3/requirements-bench.txt
if [ -z "${BENCH_SMOKE:-}" ]; then
	PY=$(bash "$top/tests/python/venv.sh" "$req")/bin/python
	systems=${SYSTEMS:-links slices streaming litdata}
else
	# the smoke installs nothing and converts nothing: shardfs alone,
	# with Debian's python3 and torch
	PY=/usr/bin/python3
	systems=links
fi
B=${BENCH_DIR:-/var/tmp/shardfs-s3}
mkdir -p "$B"
work=$(mktemp -d "$B/run-XXXXXX")
S=$work/s3fs
gw_pid= proxy_pid= s3fs_pid=
cleanup() {
	local m
	for m in "$work"/v-*-[01] "$S"; do
		if mountpoint -q "$m"; then fusermount3 -u "$m"; fi
	done
	[ -z "$s3fs_pid" ] || wait "$s3fs_pid" 2>/dev/null || true
	for p in $proxy_pid $gw_pid; do kill "$p" 2>/dev/null || true; done
	rm -rf --one-file-system "$work"
}
trap cleanup EXIT
trap 'exit 143' TERM INT HUP

# --- the data, made and converted once per size under $B ---
data=$B/data-$samples-$nshards
if [ ! -e "$data/.done" ]; then
	rm -rf "$data"
	echo "generating $samples samples in $nshards tar shards in $data/tar"
	$PY "$D" make "$data/tar" --samples "$samples" --shards "$nshards"
	touch "$data/.done"
fi
chunk=$(($(cat "$data"/tar/*.tar | wc -c) / nshards + 1))
if [ "$PY" != /usr/bin/python3 ]; then
	for f in mds litdata; do
		[ -e "$data/$f.done" ] && continue
		rm -rf "${data:?}/$f"
		echo "converting to $f (not timed)"
		$PY "$D" convert $f "$data/tar" "$data/$f" --chunk-bytes "$chunk" \
			> "$work/convert.log" 2>&1 || { cat "$work/convert.log"; exit 1; }
		touch "$data/$f.done"
	done
fi

# --- the server, the proxy in front of it, the upload ---
export AWS_ACCESS_KEY_ID=shardfs-bench AWS_SECRET_ACCESS_KEY=shardfs-bench-secret
export AWS_DEFAULT_REGION=us-east-1 AWS_REGION=us-east-1
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
wait_port() {
	local i
	for i in $(seq 100); do
		(: < "/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
		sleep 0.1
	done
	echo "bench_s3: nothing answers on 127.0.0.1:$1 (see $2)" >&2
	cat "$2" >&2
	return 1
}
port=$(free_port)
mkdir -p "$work/gw"
ROOT_ACCESS_KEY_ID=$AWS_ACCESS_KEY_ID ROOT_SECRET_ACCESS_KEY=$AWS_SECRET_ACCESS_KEY \
	"$gw" --port "127.0.0.1:$port" --quiet --keep-alive posix "$work/gw" > "$work/gw.log" 2>&1 &
gw_pid=$!
wait_port "$port" "$work/gw.log"
pport=$(free_port)
python3 "$top/tests/mount/s3/delay_proxy.py" "$pport" "$port" "$delay" > "$work/proxy.log" 2>&1 &
proxy_pid=$!
wait_port "$pport" "$work/proxy.log"
url=http://127.0.0.1:$port proxy=http://127.0.0.1:$pport
mkdir -p "$work/up"
# the peers' formats only for the peers that run
for f in tar mds litdata; do
	case "$f: $systems " in
	"mds:"*" streaming "* | "litdata:"*" litdata "* | tar:*) ;;
	*) continue ;;
	esac
	[ -d "$data/$f" ] && ln -s "$data/$f" "$work/up/$f"
done
"$s3venv/bin/python" - "$url" "$work/up" <<-'PY'
	import os, sys, boto3
	from botocore.config import Config
	url, root = sys.argv[1:3]
	s3 = boto3.client("s3", endpoint_url=url,
	                  config=Config(s3={"addressing_style": "path"}))
	s3.create_bucket(Bucket="data")
	n = size = 0
	for top in sorted(os.listdir(root)):
	    for d, dirs, files in os.walk(os.path.join(root, top), followlinks=True):
	        dirs.sort()
	        for f in sorted(files):
	            p = os.path.join(d, f)
	            s3.upload_file(p, "data", os.path.relpath(p, root))
	            n, size = n + 1, size + os.path.getsize(p)
	print("uploaded %d objects, %d MB" % (n, size // 1000000))
	PY
echo "data: $samples samples of 8-200 KB in $nshards tar shards, $(($(cat "$data"/tar/*.tar | wc -c) / 1000000)) MB; the peers' shards of $((chunk / 1000)) KB at most"

# --- the proxy's latency, measured: HEAD of one object, direct and through
# it, on one kept-alive connection ---
"$s3venv/bin/python" - "$url" "$proxy" "$delay" <<-'PY'
	import sys, time, boto3
	from botocore.config import Config
	for name, url in zip(("direct", "proxy"), sys.argv[1:3]):
	    s3 = boto3.client("s3", endpoint_url=url,
	                      config=Config(s3={"addressing_style": "path"}))
	    s3.head_object(Bucket="data", Key="tar/shard-00000.tar")
	    t = time.perf_counter()
	    for i in range(50):
	        s3.head_object(Bucket="data", Key="tar/shard-00000.tar")
	    print("  HEAD, %s: %.1f ms" % (name, (time.perf_counter() - t) / 50 * 1e3))
	print("  (the proxy adds %s ms to each request and each new connection)" % sys.argv[3])
	PY

# --- s3fs: read-only, path-style, through the proxy, use_cache emptied ---
printf '%s:%s\n' "$AWS_ACCESS_KEY_ID" "$AWS_SECRET_ACCESS_KEY" > "$work/passwd"
chmod 600 "$work/passwd"
mkdir -p "$S"
# for a dataset that does not change while mounted (docs/deploy.md, "A
# dataset in S3"): kernel_cache keeps the page cache of an object across
# opens, attr_timeout and entry_timeout let the kernel keep its attributes
# and names an hour (libfuse's 1 s by default); S3FS_OPTIONS= replaces them
s3fs_opts=${S3FS_OPTIONS-kernel_cache,attr_timeout=3600,entry_timeout=3600}
s3fs_mount() {
	rm -rf "$work/s3fs-cache"
	mkdir -p "$work/s3fs-cache"
	s3fs data "$S" -f -o "url=$proxy,use_path_request_style,passwd_file=$work/passwd,ro,use_cache=$work/s3fs-cache${s3fs_opts:+,$s3fs_opts}" \
		>> "$work/s3fs.log" 2>&1 &
	s3fs_pid=$!
	wait_mounted "$S" 10 || { cat "$work/s3fs.log" >&2; return 1; }
}
s3fs_umount() { fusermount3 -u "$S"; wait "$s3fs_pid"; s3fs_pid=; }
# rclone mount, for the indexer only: its default cache mode (off) reads
# ranges of an object as they are asked for, where s3fs fetches it whole
cat > "$work/rclone.conf" <<-EOF
	[gw]
	type = s3
	provider = Other
	endpoint = $proxy
	force_path_style = true
	env_auth = true
EOF
rclone_mount() {
	env -u AWS_CA_BUNDLE rclone --config "$work/rclone.conf" mount gw:data "$S" \
		--read-only 2>> "$work/rclone.log" &
	s3fs_pid=$!
	wait_mounted "$S" 10 || { cat "$work/rclone.log" >&2; return 1; }
}
stats() { curl -s "$proxy/__proxy/stats"; }

# index_run ADAPTER WHAT ARGS...: shardfs-index over a fresh mount by
# ADAPTER (s3fs or rclone), its time and requests as one line of
# $work/index.jsonl
index_run() {
	local what="$2, $1" a b t
	"$1_mount"
	shift 2
	a=$(stats)
	t=$(timed "$bin/shardfs-index" "$S/tar" --quiet "$@")
	b=$(stats)
	s3fs_umount
	python3 - "$what" "$t" "$a" "$b" >> "$work/index.jsonl" <<-'PY'
		import json, sys
		what, t, a, b = sys.argv[1], float(sys.argv[2]), *map(json.loads, sys.argv[3:5])
		kinds = {k: v - a["kinds"].get(k, 0) for k, v in b["kinds"].items()
		         if v - a["kinds"].get(k, 0)}
		print(json.dumps({"what": what, "seconds": t, "proxy": {
		    "requests": b["requests"] - a["requests"],
		    "bytes_down": b["bytes_down"] - a["bytes_down"], "kinds": kinds}}))
		PY
}

res=$work/results.jsonl
for r in $(seq "$runs"); do
	echo "run $r of $runs ($(date -u +%H:%M:%S), load $(cut -d' ' -f1-3 /proc/loadavg))"
	rm -rf "$work/idx" "$work/idx-nohash" "$work/idx-rclone"
	index_run s3fs "shardfs-index --out DIR" --out "$work/idx"
	if [ "${INDEX_RUNS:-1}" != 0 ]; then
		index_run s3fs "shardfs-index --out DIR --no-hash" --out "$work/idx-nohash" --no-hash
		rm -rf "$work/idx-nohash"
		index_run s3fs "shardfs-index --out DIR --no-hash --jobs 8" --out "$work/idx-nohash" --no-hash --jobs 8
		if command -v rclone > /dev/null; then
			index_run rclone "shardfs-index --out DIR --no-hash" --out "$work/idx-rclone" --no-hash
		fi
	fi
	for s in $systems; do
		case $s in
		links | slices)
			o=symlinks=1
			[ $s = slices ] && o=symlinks=0
			s3fs_mount
			$PY "$D" job --system $s --out "$res" --proxy "$proxy" --tag "$r" \
				--watch "$s3fs_pid" --mount "${SHARDFS_BIN:-$bin/shardfs},$S/tar,$work/v-$s,world=2,workers=2,batch=32,$o,index=$work/idx${SHARDFS_OPTIONS:+,$SHARDFS_OPTIONS}" \
				> "$work/job.log" 2>&1 || { echo "  $s: failed"; tail -20 "$work/job.log"; }
			s3fs_umount
			;;
		streaming | litdata)
			f=mds
			[ $s = litdata ] && f=litdata
			S3_ENDPOINT_URL=$proxy $PY "$D" job --system $s --out "$res" --proxy "$proxy" \
				--tag "$r" --remote "s3://data/$f" --cache "$work/cache-$s" \
				> "$work/job.log" 2>&1 || { echo "  $s: failed"; tail -20 "$work/job.log"; }
			rm -rf "$work/cache-$s"
			;;
		esac
	done
done
cp "$res" "$B/results-$(date +%Y%m%d-%H%M%S).jsonl"
echo "machine: $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB; delay $delay ms a request; s3fs $(s3fs --version 2>&1 | grep -o 'V[0-9.]*' | head -1); load now $(cut -d' ' -f1-3 /proc/loadavg)"
$PY "$D" report "$res" --index "$work/index.jsonl"
