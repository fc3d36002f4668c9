#!/bin/bash
# shardfs-index against a source that changes between its listing and its
# opens (issue 30): it opens every shard as the daemon does (below the
# source, no symlink on the way, O_NONBLOCK, regular files only), so a
# shard swapped for a FIFO is reported, never waited on, and a directory
# swapped for a symlink is refused, never indexed from outside the source.
. "$(dirname "$0")/../lib.sh"

# slow_source DIR SUB: DIR/shard-000000.tar, one sparse 256 MiB member that
# the indexer (--jobs 1, hashing) is busy with for a while, then
# DIR/SUB/shard-000001.tar
slow_source() {
	mkdir -p "$1"
	shardfs-mkdata "$T/gen" --shards 2 --samples 5 --seed 1 > /dev/null
	mkdir -p "$1/$2"
	mv "$T/gen/shard-000001.tar" "$1/$2/"
	rm -rf "$T/gen"
	python3 - "$1/shard-000000.tar" <<'EOF'
import sys, tarfile
n = 256 << 20
ti = tarfile.TarInfo("big.bin")
ti.size, ti.mtime = n, 0
with open(sys.argv[1], "wb") as f:
    f.write(ti.tobuf(format=tarfile.USTAR_FORMAT))
    f.truncate(512 + n + 1024)
EOF
}

# index_racing SRC OUT CHANGE...: run shardfs-index SRC --out OUT (bounded
# by timeout: a hang is a failure, not a stuck test) and, once it has
# shard-000000.tar open (the listing done, the next shard not yet opened),
# run CHANGE; its status in $T/status, its stderr in $T/err; fails unless
# the change happened while the first shard was open
index_racing() {
	local src=$1 out=$2 pid i seen=0
	shift 2
	timeout 30 shardfs-index "$src" --out "$out" --jobs 1 --quiet \
		2> "$T/err" &
	pid=$!
	for ((i = 0; i < 3000; i++)); do
		# timeout's child is the indexer
		local kid
		kid=$(pgrep -P "$pid" | head -1)
		if [ -n "$kid" ] && ls -l "/proc/$kid/fd" 2> /dev/null |
			grep -q 'shard-000000.tar$'; then
			"$@"
			seen=1
			break
		fi
		sleep 0.01
	done
	wait "$pid"
	echo $? > "$T/status"
	expect_eq "the source changed while the indexer read its first shard" \
		"$seen" 1
}

# A shard swapped for a FIFO after the listing: reported, the rest not
# indexed (without --skip-bad), and no hang (status 124 from timeout).
slow_source "$T/fifo" .
swap_fifo() {
	rm "$T/fifo/shard-000001.tar"
	mkfifo "$T/fifo/shard-000001.tar"
}
index_racing "$T/fifo" "$T/fifo-idx" swap_fifo
expect_eq "a FIFO swapped in: status" "$(cat "$T/status")" 2
expect_eq "a FIFO swapped in: message" "$(cat "$T/err")" \
	"shardfs-index: 1 shard could not be indexed: shard-000001.tar: not a regular file (the source changed since it was listed); fix or remove it, or run shardfs-index --skip-bad to index the rest"

# A directory swapped for a symlink to a directory outside the source:
# refused, not indexed from outside.
slow_source "$T/link" sub
shardfs-mkdata "$T/outside" --shards 2 --samples 9 --seed 2 > /dev/null
swap_dir() {
	mv "$T/link/sub" "$T/link-sub-old"
	ln -s "$T/outside" "$T/link/sub"
}
index_racing "$T/link" "$T/link-idx" swap_dir
expect_eq "a directory swapped for a symlink: status" "$(cat "$T/status")" 2
expect_eq "a directory swapped for a symlink: message" "$(cat "$T/err")" \
	"shardfs-index: 1 shard could not be indexed: sub/shard-000001.tar: cannot open: a symlink on its path (the source changed since it was listed); fix or remove it, or run shardfs-index --skip-bad to index the rest"
expect_eq "a directory swapped for a symlink: nothing indexed" \
	"$(ls "$T/link-idx" 2> /dev/null | grep -c manifest)" 0

# A directory that is a symlink when listed is not walked at all.
mkdir -p "$T/static"
shardfs-mkdata "$T/static" --shards 1 --samples 3 --seed 3 > /dev/null
ln -s "$T/outside" "$T/static/sub"
expect_run "a symlinked directory listed: not walked" 0 "" -- \
	shardfs-index "$T/static" --out "$T/static-idx" --quiet
expect_eq "a symlinked directory listed: one shard" \
	"$(shardfs-plan "$T/static" --index "$T/static-idx" --json |
		python3 -c 'import json,sys; print(json.load(sys.stdin)["samples"])')" 3

finish
