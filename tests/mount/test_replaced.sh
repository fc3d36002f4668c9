#!/usr/bin/env bash
# A shard deleted, or replaced by a rename over it, while the daemon holds
# it open (issue 30): the files of that shard fail with EIO and one log
# line naming it, at their next read, as docs/security.md says, instead of
# serving the bytes of a file the source no longer has; and once the shard
# is back as indexed, they read its bytes again.
. "$(dirname "$0")/../lib.sh"
M=$T/mnt
O="world=1,workers=1,block=20,shuffle=none,symlinks=0,prefetch=0"

shardfs-mkdata "$T/src" --shards 2 --samples 40 --seed 1 >/dev/null
shardfs-index "$T/src" --quiet || bad "index"
shardfs-mkdata "$T/other" --shards 2 --samples 50 --seed 2 >/dev/null

mount_view "$T/src" "$M" "$O" || bad "mount"
d=$M/0/0
# in order: shard-000000's slices 0-19 and 20-39, then shard-000001's
a0=$d/000000-shard-000000.0-19.tar
a1=$d/000001-shard-000000.20-39.tar
b0=$d/000002-shard-000001.0-19.tar
b1=$d/000003-shard-000001.20-39.tar

# read one slice of each shard: the daemon now holds both shards open
cat "$a0" >"$T/a0" && cat "$b0" >"$T/b0" || bad "first reads"
expect_eq "a slice of shard-000000 reads" "$(wc -c <"$T/a0")" "$(stat -c %s "$a0")"
expect_eq "a slice of shard-000001 reads" "$(wc -c <"$T/b0")" "$(stat -c %s "$b0")"
# the shards as indexed (bytes and mtime), to put back below
cp -p "$T/src/shard-000000.tar" "$T/src/shard-000001.tar" "$T/" ||
	bad "keep"

# uncache FILE: drop the kernel's cached pages of FILE, so that its next
# read reaches the daemon
uncache() {
	python3 -c 'import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)' "$1"
}
log_has() { grep -cF "$1" "${daemon_log[$M]}"; }

# the slices read before fail at their next read (their descriptors have
# no name left): deleted, and replaced by a rename over it
rm "$T/src/shard-000000.tar"
uncache "$a0"
expect_run "a shard deleted while held: a file read before fails" 1 \
	"cat: $a0: Input/output error" -- cat "$a0"
expect_eq "a shard deleted while held: one log line names it" \
	"$(log_has 'shard-000000.tar was deleted or replaced since it was opened; its files fail with EIO')" 1
mv "$T/other/shard-000001.tar" "$T/src/shard-000001.tar"
uncache "$b0"
expect_run "a shard renamed over while held: a file read before fails" 1 \
	"cat: $b0: Input/output error" -- cat "$b0"
expect_eq "a shard renamed over while held: one log line names it" \
	"$(log_has 'shard-000001.tar was deleted or replaced since it was opened')" 1

# the slices never read fail at their open (the path names nothing, or a
# file that is not the one indexed); so may the kernel's second try of the
# page of a slice read before (its entry went with the first failure: it
# opens the source again), when it comes after the first failure: one or
# two lines each
expect_run "a shard deleted while held: a file not read before fails" 1 \
	"cat: $a1: Input/output error" -- cat "$a1"
expect_eq "a shard deleted while held: its log line" \
	"$(log_has 'shard-000000.tar: cannot open: No such file or directory' | sed 's/^2$/1/')" 1
expect_run "a shard renamed over while held: a file not read before fails" 1 \
	"cat: $b1: Input/output error" -- cat "$b1"
expect_eq "a shard renamed over while held: the new file is refused" \
	"$(log_has 'shard-000001.tar changed since it was indexed (size 162816, the index says 125952, and a new mtime)' | sed 's/^2$/1/')" 1

# put back as indexed (bytes and mtime), the shards read again
cp -p "$T/shard-000000.tar" "$T/shard-000001.tar" "$T/src/" || bad "put back"
uncache "$a0"
uncache "$b0"
expect_run "a deleted shard put back as indexed: a file read before reads its bytes" 0 "" -- cmp "$T/a0" "$a0"
expect_run "a shard renamed over, put back as indexed: a file read before reads its bytes" 0 "" -- cmp "$T/b0" "$b0"
expect_eq "a shard put back: a file not read before reads" "$(cat "$a1" | wc -c)" "$(stat -c %s "$a1")"

# deleted again while held, its file read before fails at every read while
# it is gone, and reads the shard's bytes again once it is back (the entry
# that failed went: its next read opens the source again)
rm "$T/src/shard-000000.tar"
uncache "$a0"
expect_run "deleted again: a file read before fails" 1 \
	"cat: $a0: Input/output error" -- cat "$a0"
uncache "$a0"
expect_run "deleted again: a file read before still fails" 1 \
	"cat: $a0: Input/output error" -- cat "$a0"
cp -p "$T/shard-000000.tar" "$T/src/" || bad "put back"
uncache "$a0"
expect_run "put back again: a file read before reads its bytes" 0 "" -- cmp "$T/a0" "$a0"
unmount_view "$M"

finish
