#!/usr/bin/env bash
# A shard deleted, or replaced by a rename over it, while the daemon holds
# it open (issue 30): the files of that shard fail with EIO and one log
# line naming it, at their next read, as docs/security.md says, instead of
# serving the bytes of a file the source no longer has.
. "$(dirname "$0")/lib.sh"
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
expect_eq "a slice of shard-000000 reads" "$(cat "$a0" | wc -c)" "$(stat -c %s "$a0")"
expect_eq "a slice of shard-000001 reads" "$(cat "$b0" | wc -c)" "$(stat -c %s "$b0")"

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
# file that is not the one indexed)
expect_run "a shard deleted while held: a file not read before fails" 1 \
	"cat: $a1: Input/output error" -- cat "$a1"
expect_eq "a shard deleted while held: its log line" \
	"$(log_has 'shard-000000.tar: cannot open: No such file or directory')" 1
expect_run "a shard renamed over while held: a file not read before fails" 1 \
	"cat: $b1: Input/output error" -- cat "$b1"
expect_eq "a shard renamed over while held: the new file is refused" \
	"$(log_has 'shard-000001.tar changed since it was indexed (size 162816, the index says 125952, and a new mtime)')" 1
unmount_view "$M"

finish
