#!/usr/bin/env bash
# The daemon under valgrind memcheck for one integration pass: a tar view
# of slices read byte for byte (check_view.py), real tools, the control
# files and xattrs, an epoch switch, a changed shard, then unmount.
# Memcheck must report zero errors and no definitely or indirectly lost
# bytes.  (Not run in the sanitizer build: valgrind and ASan exclude each
# other.)
. "$(dirname "$0")/../lib.sh"
check="$TESTS/mount/check_view.py"
M=$T/mnt
shardfs-mkdata "$T/tar" --format tar --shards 6 --samples 5-40 --size 0-900 --seed 21 >/dev/null
shardfs-index "$T/tar" --quiet
vlog=$T/valgrind.log
DAEMON_WRAP="valgrind --quiet --leak-check=full --show-leak-kinds=definite,indirect --errors-for-leak-kinds=definite,indirect --error-exitcode=99 --log-file=$vlog" \
	mount_view "$T/tar" "$M" "world=2,workers=2,block=7,symlinks=0,shuffle=samples" || bad "mount under valgrind"
out=$(python3 "$check" "$M" tar)
expect_eq "under valgrind: view = plan" "$?" 0 || echo "$out" >&2
f=$(ls -d "$M"/1/1/* | head -1)
expect_run "under valgrind: tar -tf" 0 "" -- tar -tf "$f"
expect_eq "under valgrind: xattr" "$(getfattr --absolute-names --only-values -n user.shardfs.epoch "$f")" 0
cat "$M/.shardfs/status" "$M/.shardfs/plan.json" > /dev/null
echo 1 > "$M/.shardfs/epoch"
out=$(python3 "$check" "$M" tar)
expect_eq "under valgrind: epoch 1 = plan" "$?" 0 || echo "$out" >&2
expect_run "under valgrind: a bad epoch write" 1 "bash: line 1: echo: write error: Invalid argument" -- bash -c "echo x > '$M/.shardfs/epoch'"
f=$(ls -d "$M"/0/0/* | head -1)
src=$(getfattr --absolute-names --only-values -n user.shardfs.source "$f")
echo extra >> "$src"
# (check_view read it: drop its pages, which hold the bytes as indexed and
# which, with no_open, the kernel serves without asking the daemon)
python3 -c 'import os, sys; os.posix_fadvise(os.open(sys.argv[1], os.O_RDONLY), 0, 0, os.POSIX_FADV_DONTNEED)' "$f"
expect_run "under valgrind: changed shard" 1 "cat: $f: Input/output error" -- cat "$f"
unmount_view "$M"
# valgrind 3.19 does not know openat2 (syscall 437) and says so; the daemon
# then opens shards with its fallback, which this pass covers
expect_eq "valgrind: no errors, nothing lost" "$(grep -v -e 'unhandled amd64-linux syscall: 437' \
	-e 'write your own handler' -e README_MISSING_SYSCALL_OR_IOCTL -e 'consider this a bug' \
	-e 'valgrind.org/support/bug_reports' "$vlog")" ""
finish
