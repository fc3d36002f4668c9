#!/usr/bin/env bash
# A dataset in an object store: a real S3 server on 127.0.0.1 (versitygw,
# a POSIX-backed S3 gateway built from its Go module, tests/mount/s3/versitygw.sh),
# a dataset of shardfs-mkdata (tar, jsonl, parquet) uploaded into a bucket
# with boto3 (tests/mount/s3/requirements-s3.txt, no directory objects, as
# `aws s3 sync` writes), the bucket mounted read-only with s3fs and with
# rclone mount (Debian's), and over them: shardfs-index (--out on local
# disk; --no-hash; --part 0/2, 1/2 and --merge), views with symlinks=1 and
# 0, world=2,workers=2, every reader's samples read (tarfile, lines) as
# shardfs-plan --json plans them, byte for byte against the bucket
# (tests/mount/check_view.py), shardfs-check view, an epoch switch; what
# the adapters report (mtime in whole seconds, st_nlink, inode numbers);
# who may read (s3fs's modes, allow_other, as uid 65534); the index kept
# in the bucket; a stream uploaded while follow=1 readers wait; an object
# deleted and uploaded again while a view serves it (docs/s3.md).
# Everything it mounts is unmounted by path, the gateway stopped by the
# PID it started, on every exit.
. "$(dirname "$0")/../../lib.sh"
check="$TESTS/mount/check_view.py"
counts="$TESTS/mount/s3/counts.py"
start=$(date +%s)

gw_pid=
cleanup() {
	local i
	# views first, then the bucket's mounts they read from
	for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do
		if mountpoint -q "${mounts[i]}"; then
			fusermount3 -u "${mounts[i]}" 2>/dev/null ||
				umount -l "${mounts[i]}"
		fi
	done
	[ -n "$gw_pid" ] && kill -0 "$gw_pid" 2>/dev/null && kill -TERM "$gw_pid"
	unmount_all
}
trap cleanup EXIT
# a signal (ctest's timeout, ^C) exits through cleanup too
trap 'exit 143' TERM INT HUP

for tool in s3fs rclone; do
	command -v $tool > /dev/null || {
		bad "$tool is not installed: run tests/install-deps.sh as root"
		finish
		exit
	}
done
gw=$(bash "$TESTS/mount/s3/versitygw.sh") || { bad "build versitygw"; finish; exit; }
venv=$(bash "$TESTS/python/venv.sh" "$TESTS/mount/s3/requirements-s3.txt") ||
	{ bad "install boto3"; finish; exit; }

# --- the server: a free port on the loopback, a root of its own ---
export AWS_ACCESS_KEY_ID=shardfs-test AWS_SECRET_ACCESS_KEY=shardfs-test-secret
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
url=http://127.0.0.1:$port
mkdir -p "$T/gw"
ROOT_ACCESS_KEY_ID=$AWS_ACCESS_KEY_ID ROOT_SECRET_ACCESS_KEY=$AWS_SECRET_ACCESS_KEY \
	"$gw" --port "127.0.0.1:$port" --quiet posix "$T/gw" > "$T/gw.log" 2>&1 &
gw_pid=$!
for i in $(seq 100); do
	(: < "/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
	kill -0 "$gw_pid" 2>/dev/null || break
	sleep 0.1
done
(: < "/dev/tcp/127.0.0.1/$port") 2>/dev/null ||
	{ bad "versitygw answers on $url"; cat "$T/gw.log" >&2; finish; exit; }
bucket() { "$venv/bin/python" "$TESTS/mount/s3/bucket.py" "$url" data "$@"; }

# --- the dataset, uploaded ---
for f in tar jsonl parquet; do mkdir -p "$T/data/$f"; done
shardfs-mkdata "$T/data/tar" --format tar --shards 5 --samples 3-30 --size 0-3000 --seed 21
shardfs-mkdata "$T/data/jsonl" --format jsonl --shards 4 --samples 3-40 --seed 22
shardfs-mkdata "$T/data/parquet" --format parquet --shards 3 --samples 20-60 --size 1-40 --seed 23 > /dev/null
expect_eq "upload" "$(bucket upload "$T/data")" "uploaded 12 objects, listed 12"
uploaded=$(date +%s)
# the plans of the local copy, for comparison: the same bytes, other mtimes
for f in tar jsonl parquet; do
	cp -r "$T/data/$f" "$T/local-$f"
	shardfs-index "$T/local-$f" --quiet
done

# --- s3fs: read-only, path-style requests to the local endpoint; the stat
# cache kept short so that the deletion below is seen in a second ---
S=$T/s3fs
printf '%s:%s\n' "$AWS_ACCESS_KEY_ID" "$AWS_SECRET_ACCESS_KEY" > "$T/passwd"
chmod 600 "$T/passwd"
mkdir -p "$S"
mounts+=("$S")
s3fs data "$S" -f -o "url=$url,use_path_request_style,passwd_file=$T/passwd,ro,stat_cache_expire=1" \
	> "$T/s3fs.log" 2>&1 &
for i in $(seq 100); do
	mountpoint -q "$S" && [ -d "$S/tar" ] && break
	sleep 0.1
done
mountpoint -q "$S" || { bad "s3fs mounts the bucket"; cat "$T/s3fs.log" >&2; finish; exit; }

# what the adapter gives: the objects' bytes; directories for the prefixes
# though the bucket has no directory objects; mtimes in whole seconds (the
# objects' Last-Modified); one link; an inode number that stays while the
# file is in use
expect_eq "s3fs: the bucket's files" "$(cd "$S" && find . -type f | sort)" \
	"$(cd "$T/data" && find . -type f | sort)"
for f in $(cd "$T/data" && find . -type f); do
	cmp -s "$S/$f" "$T/data/$f" || bad "s3fs: $f byte for byte"
done
ok
expect_eq "s3fs: mtime in whole seconds" \
	"$(stat -c %y "$S"/tar/* | cut -d' ' -f2 | cut -d. -f2 | sort -u)" 000000000
expect_eq "s3fs: one link" "$(stat -c %h "$S"/tar/* | sort -u)" 1
ino=$(stat -c %i "$S/tar/shard-000000.tar")

# --- the index, beside the read-only source ---
mkdir -p "$T/idx"
expect_run "shardfs-index of the read-only mount, no --out" 2 \
	"shardfs-index: $S/tar/.shardfs: cannot create the index directory: Read-only file system; if the source is read-only, put the index elsewhere with --out DIR" \
	-- shardfs-index "$S/tar" --quiet
for f in tar jsonl parquet; do
	shardfs-index "$S/$f" --out "$T/idx/$f" --quiet || bad "index $S/$f"
	for e in 0 1; do
		o=world=2,workers=2,epoch=$e
		shardfs-plan "$S/$f" --index "$T/idx/$f" -o $o --json > "$T/plan-$f-$e.json"
		expect_eq "$f $o: the plan over s3fs is the local copy's" \
			"$(shardfs-plan "$T/local-$f" -o $o --json | sha256sum)" \
			"$(sha256sum < "$T/plan-$f-$e.json")"
	done
done
shardfs-index "$S/tar" --out "$T/idx/tar-nohash" --no-hash --quiet || bad "index --no-hash"
for p in 0 1; do
	shardfs-index "$S/tar" --part $p/2 --out "$T/idx/part$p" --quiet ||
		bad "index --part $p/2"
done
expect_eq "--merge" "$(shardfs-index "$S/tar" --merge --out "$T/idx/merged" "$T/idx/part0" "$T/idx/part1")" \
	"merged 2 parts: 5 shards, $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["samples"])' "$T/idx/tar/manifest.json") samples; index in $T/idx/merged"
expect_eq "the merged index is the one a run writes" \
	"$(cmp "$T/idx/merged/manifest.json" "$T/idx/tar/manifest.json" && echo same)" same
expect_eq "s3fs: the inode number after indexing" "$(stat -c %i "$S/tar/shard-000000.tar")" "$ino"

# plan_of PLAN.json: its epoch and its readers' files
plan_of() {
	python3 -c 'import json, sys; p = json.load(open(sys.argv[1])); print(p["options"]["epoch"], json.dumps(p["readers"], sort_keys=True))' "$1"
}

# view_checks SRC MNT FMT INDEX OPTIONS: mount, then in epochs 0 and 1 every
# reader's samples as shardfs-plan --json plans them, the view byte for
# byte against the bucket, shardfs-check view; unmount
view_checks() {
	local src=$1 m=$2 fmt=$3 idx=$4 opts=$5 e out what="$1 $5"
	mount_view "$src" "$m" "$opts,index=$idx" || { bad "$what: mount"; return; }
	for e in 0 1; do
		[ $e = 1 ] && echo 1 > "$m/.shardfs/epoch"
		expect_eq "$what epoch $e: the plan served is shardfs-plan's" \
			"$(plan_of "$m/.shardfs/plan.json")" "$(plan_of "$T/plan-$fmt-$e.json")"
		if [ "$fmt" != parquet ]; then
			out=$(python3 "$counts" "$m" "$fmt" "$T/plan-$fmt-$e.json")
			expect_eq "$what epoch $e: samples read as planned" "$?" 0 || echo "$out" >&2
			out=$(python3 "$check" "$m" "$fmt")
			expect_eq "$what epoch $e: view = plan, byte for byte" "$?" 0 || echo "$out" >&2
		fi
		out=$(shardfs-check view "$m" $([ $e = 0 ] && echo --verify))
		expect_eq "$what epoch $e: shardfs-check view" "$?" 0 || echo "$out" >&2
	done
	unmount_view "$m"
}

# --- views over s3fs ---
for f in tar jsonl; do
	for sl in 1 0; do
		view_checks "$S/$f" "$T/v" $f "$T/idx/$f" world=2,workers=2,symlinks=$sl
	done
done
view_checks "$S/parquet" "$T/v" parquet "$T/idx/parquet" world=2,workers=2
view_checks "$S/tar" "$T/v" tar "$T/idx/tar-nohash" world=2,workers=2,symlinks=0
expect_eq "s3fs: the inode number after the views" "$(stat -c %i "$S/tar/shard-000000.tar")" "$ino"

# --- who may read: objects carry no modes; s3fs shows its mount 700 and
# the objects 640 root's (its user's), so a view with allow_other
# serves them 400 and another user is refused.  With s3fs's allow_other
# and umask=0022 (a second mount of the same bucket) they are 755/644:
# the view's slices are 444 and whole shards, symlinks into the bucket's
# mount, read by another user too ---
as_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
chmod 755 "$T"
P=$T/s3fs-pub
mkdir -p "$P"
mounts+=("$P")
s3fs data "$P" -f -o "url=$url,use_path_request_style,passwd_file=$T/passwd,ro,allow_other,umask=0022" \
	> "$T/s3fs-pub.log" 2>&1 &
for i in $(seq 100); do
	mountpoint -q "$P" && [ -d "$P/tar" ] && break
	sleep 0.1
done
O=world=1,workers=1,block=16,shuffle=none,allow_other
if mount_view "$S/tar" "$T/v" "$O,symlinks=0,index=$T/idx/tar"; then
	f=$(ls -d "$T"/v/0/0/* | head -1)
	expect_eq "s3fs's modes: the view's files are 400 root's" \
		"$(stat -c '%a %u:%g' "$T"/v/0/0/* | sort -u)" "400 0:0"
	expect_run "s3fs's modes: another user is refused" 1 \
		"cat: $f: Permission denied" -- as_nobody cat "$f"
	unmount_view "$T/v"
fi
# the index made over the other mount serves this one: same sizes, mtimes
if mountpoint -q "$P" && mount_view "$P/tar" "$T/v" "$O,symlinks=1,index=$T/idx/tar"; then
	expect_eq "umask=0022: the slices are 444 root's" \
		"$(stat -c '%a %u:%g' "$T"/v/0/0/*.*-*.tar | sort -u)" "444 0:0"
	expect_eq "umask=0022: another user reads every file, whole shards through the bucket's mount" \
		"$(as_nobody cat "$T"/v/0/0/* | sha256sum)" "$(cat "$T"/v/0/0/* | sha256sum)"
	expect_eq "umask=0022: one whole shard, a symlink into the bucket's mount" \
		"$(find "$T/v/0/0" -type l -printf '%f %l\n')" "000004-shard-000002.tar $P/tar/shard-000002.tar"
	unmount_view "$T/v"
else
	bad "s3fs with allow_other,umask=0022: mount and view"
	cat "$T/s3fs-pub.log" >&2
fi
fusermount3 -u "$P" || bad "unmount $P"

# --- rclone mount of the same bucket: read-only, path-style; its S3
# client refuses AWS_CA_BUNDLE (set on some machines) with an http
# endpoint, so it runs without it.  Its mtimes are the same
# Last-Modified, whole seconds: the index made over s3fs serves it ---
R=$T/rclone
cat > "$T/rclone.conf" <<-EOF
	[gw]
	type = s3
	provider = Other
	endpoint = $url
	force_path_style = true
	env_auth = true
EOF
chmod 600 "$T/rclone.conf"
mkdir -p "$R"
mounts+=("$R")
env -u AWS_CA_BUNDLE rclone --config "$T/rclone.conf" mount gw:data "$R" \
	--read-only 2> "$T/rclone.log" &
for i in $(seq 100); do
	mountpoint -q "$R" && [ -d "$R/tar" ] && break
	sleep 0.1
done
if mountpoint -q "$R"; then
	expect_eq "rclone: the mtimes are s3fs's" "$(cd "$R" && stat -c '%n %s %Y %h' */* | sort)" \
		"$(cd "$S" && stat -c '%n %s %Y %h' */* | sort)"
	for f in tar jsonl; do
		view_checks "$R/$f" "$T/v" $f "$T/idx/$f" world=2,workers=2,symlinks=0
	done
	shardfs-index "$R/jsonl" --out "$T/idx/rclone-jsonl" --quiet || bad "index over rclone"
	# but for its source's path (and so its checksum)
	expect_eq "the index over rclone is the one over s3fs" "$(python3 -c '
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:3])
for m in a, b:
    del m["source"], m["checksum"]
print("same" if a == b else "differ")' "$T/idx/rclone-jsonl/manifest.json" "$T/idx/jsonl/manifest.json")" same
	fusermount3 -u "$R" || bad "unmount rclone"
else
	bad "rclone mounts the bucket"
	cat "$T/rclone.log" >&2
fi

# --- a stream that grows in the bucket (follow=1): a producer uploads
# chunks (an upload appears whole: no temporary name needed) and the end
# marker while two readers wait in stream.jsonl; s3fs sends no inotify
# events, so the daemon lists every follow_interval ---
mkdir -p "$T/stream"
for i in 0 1 2; do
	seq -f '{"i": %g}' $((i * 8)) $((i * 8 + 7)) > "$T/stream/chunk_0000$i.jsonl"
done
: > "$T/stream/end"
bucket put stream/chunk_00000.jsonl "$T/stream/chunk_00000.jsonl"
sleep 1.5 # s3fs's stat cache
O=follow=1,window=4,world=2,workers=1,format=jsonl,follow_interval=1
if mount_view "$S/stream" "$T/v" "$O,index=$T/idx/stream"; then
	(
		sleep 1
		bucket put stream/chunk_00001.jsonl "$T/stream/chunk_00001.jsonl"
		sleep 1
		bucket put stream/chunk_00002.jsonl "$T/stream/chunk_00002.jsonl"
		bucket put stream/.shardfs-end "$T/stream/end"
	) &
	producer=$!
	timeout 60 cat "$T/v/0/0/stream.jsonl" > "$T/stream-r0" &
	r0=$!
	timeout 60 cat "$T/v/1/0/stream.jsonl" > "$T/stream-r1"
	expect_eq "follow=1: reader 1 reads to the end" "$?" 0
	wait $r0
	expect_eq "follow=1: reader 0 reads to the end" "$?" 0
	wait $producer
	expect_eq "follow=1: 12 samples each" "$(cat "$T/stream-r0" | wc -l) $(cat "$T/stream-r1" | wc -l)" "12 12"
	expect_eq "follow=1: every sample of the stream once" \
		"$(sort "$T/stream-r0" "$T/stream-r1")" "$(sort "$T"/stream/chunk_*.jsonl)"
	unmount_view "$T/v"
else
	bad "follow=1 over s3fs: mount"
fi

# --- the index in the bucket: made on local disk, uploaded beside the
# shards (tar/.shardfs/), read from the mount where index= is left out ---
for f in "$T/idx/tar"/*; do
	bucket put "tar/.shardfs/${f##*/}" "$f"
done
if mount_view "$S/tar" "$T/v" world=2,workers=2,symlinks=0; then
	out=$(shardfs-check view "$T/v")
	expect_eq "the index read from the bucket: shardfs-check view" "$?" 0 || echo "$out" >&2
	expect_eq "the index read from the bucket, not built in memory" \
		"$(grep -c "no index" "${daemon_log[$T/v]}")" 0
	unmount_view "$T/v"
else
	bad "mount with the index in the bucket"
fi

# --- an object deleted while a view serves it, then uploaded again ---
M=$T/v
if mount_view "$S/tar" "$M" "world=1,workers=1,symlinks=0,index=$T/idx/tar"; then
	cat "$M"/0/0/* > /dev/null || bad "read before the deletion"
	bucket delete tar/shard-000001.tar
	sleep 2 # s3fs's stat cache: stat_cache_expire=1
	echo 1 > "$M/.shardfs/epoch"
	f=$(ls "$M"/0/0/*-shard-000001.tar)
	expect_eq "a deleted object: EIO" "$(cat "$f" 2>&1 > /dev/null)" \
		"cat: $f: Input/output error"
	expect_eq "a deleted object: the log names it" \
		"$(grep -c "^shardfs: shard-000001.tar: cannot open: No such file or directory$" "${daemon_log[$M]}")" 1
	# the same bytes again: a new Last-Modified (the server's clock, in
	# seconds), so the shard is not the one indexed
	while [ "$(date +%s)" -le "$uploaded" ]; do sleep 0.2; done
	bucket put tar/shard-000001.tar "$T/data/tar/shard-000001.tar"
	sleep 2
	size=$(stat -c %s "$T/data/tar/shard-000001.tar")
	expect_eq "uploaded again: EIO" "$(cat "$f" 2>&1 > /dev/null)" \
		"cat: $f: Input/output error"
	expect_eq "uploaded again: the log says a new mtime" \
		"$(grep -c "shard-000001.tar changed since it was indexed (size $size, the index says $size, and a new mtime)" "${daemon_log[$M]}")" 1
	for g in "$M"/0/0/*; do
		[ "$g" = "$f" ] || cat "$g" > /dev/null || bad "the other shards: $g"
	done
	unmount_view "$M"
else
	bad "mount for the deletion"
fi

fusermount3 -u "$S" || bad "unmount s3fs"
kill -TERM "$gw_pid"
wait "$gw_pid"
expect_eq "versitygw exits 0 on TERM" "$?" 0
gw_pid=
echo "s3_bucket: $(($(date +%s) - start)) s"
finish
