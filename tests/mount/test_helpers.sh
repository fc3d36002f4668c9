#!/usr/bin/env bash
# mount(8) and fstab: `mount -t shardfs`, `mount -t fuse.shardfs`, an fstab
# line in a scratch fstab (mount -T), umount, and the daemon's messages
# through mount(8).  mount(8) finds helpers only on fixed paths, so the
# build is installed (cmake --install: /usr/local and /sbin) and the
# installed files are removed again when the test ends.
. "$(dirname "$0")/../lib.sh"

cmake --install "$BUILD" --prefix /usr/local > /dev/null
installed=$(cat "$BUILD/install_manifest.txt")
# and the unit's directories, when the install made them (empty then)
trap 'unmount_all; echo "$installed" | xargs rm -f
	rmdir /usr/local/lib/systemd/system /usr/local/lib/systemd 2>/dev/null' EXIT

shardfs-mkdata "$T/src" --format tar --shards 6 --samples 5-20 --seed 31 > /dev/null
shardfs-index "$T/src" --quiet
M=$T/mnt
mkdir -p "$M"
mounts+=("$M")

# mount -t shardfs (mount.shardfs in /sbin)
mount -t shardfs "$T/src" "$M" -o world=2,workers=2,rank=0,1
expect_eq "mount -t shardfs: mounted" "$?:$(grep -c " $M fuse.shardfs " /proc/mounts)" "0:1"
expect_eq "mount -t shardfs: the view" "$(ls "$M" | tr '\n' ' ')" "0 1 "
out=$(python3 "$TESTS/mount/check_view.py" "$M" tar)
expect_eq "mount -t shardfs: view = plan" "$?" 0 || echo "$out" >&2
umount "$M"
mountpoint -q "$M" && bad "umount left it mounted" || ok
# a source that grows (follow=1) from fstab: daemonized, its streams wait
mkdir -p "$T/grow"
printf '%s %s fuse.shardfs follow=1,window=2,workers=2,format=jsonl,follow_timeout=5,_netdev 0 0\n' \
	"$T/grow" "$M" > "$T/fstab"
mount -T "$T/fstab" "$M"
expect_eq "fstab follow=1: mounted, nothing yet" "$?:$(ls "$M/0/1" | tr '\n' ' ')" "0:stream.jsonl "
(sleep 0.5; printf 'a\nb\nc\n' > "$T/grow/c0.jsonl.tmp"; mv "$T/grow/c0.jsonl.tmp" "$T/grow/c0.jsonl"; touch "$T/grow/.shardfs-end") &
expect_eq "fstab follow=1: a stream read before its data came" \
	"$(cat "$M/0/1/stream.jsonl" | tr '\n' ' ')" "b c "
wait
umount "$M"

# mount -t fuse.shardfs (mount.fuse3 runs shardfs from PATH)
mount -t fuse.shardfs "$T/src" "$M" -o world=3,rank=2,symlinks=0,block=3
expect_eq "mount -t fuse.shardfs: the view" "$?:$(ls "$M" | tr '\n' ' ')" "0:2 "
# the daemon forked: its prefetch threads must run in it (each file opened
# in order has the next one read ahead: all but the first)
n=$(ls "$M/2/0" | wc -l)
cat "$M"/2/0/* > /dev/null
for i in $(seq 100); do
	got=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["counters"]["prefetch_files"])' "$M/.shardfs/status")
	[ "$got" = $((n - 1)) ] && break
	sleep 0.1
done
expect_eq "a daemonized mount prefetches" "$got" "$((n - 1))"
umount "$M"
mountpoint -q "$M" && bad "umount left it mounted" || ok

# a mixture file is a source for mount(8) and fstab too
shardfs-mkdata "$T/src2" --format jsonl --shards 3 --samples 4-9 --seed 32 > /dev/null
shardfs-index "$T/src2" --quiet
printf '%s\n' '{"sources": [{"path": "src", "proportion": 2}, {"path": "src2", "proportion": 1}], "epoch_size": 60}' > "$T/mix.json"
mount -t fuse.shardfs "$T/mix.json" "$M" -o world=2,rank=1
expect_eq "mount -t fuse.shardfs MIX: its fsname and view" \
	"$?:$(findmnt -no SOURCE "$M"):$(ls "$M/1/0" | sed 's/^[0-9]*-//' | cut -d. -f1 | sort -u | tr '\n' ' ')" \
	"0:$T/mix.json:src src2 "
umount "$M"
printf '%s %s fuse.shardfs world=2,noauto 0 0\n' "$T/mix.json" "$M" > "$T/fstab"
mount -T "$T/fstab" "$M"
out=$(shardfs-check view "$M" 2>&1)
expect_eq "fstab MIX: audited" "$?:$(echo "$out" | grep '^sources:')" "0:sources: src 40 of 40, src2 20 of 20"
umount "$M"

# fstab: noauto and systemd's options accepted; mount MNT, mount -a
printf '%s %s fuse.shardfs world=2,workers=3,noauto,_netdev,x-systemd.automount,nofail 0 0\n' \
	"$T/src" "$M" > "$T/fstab"
mount -T "$T/fstab" "$M"
expect_eq "fstab: mount MNT" "$?:$(ls "$M/1" | tr '\n' ' ')" "0:0 1 2 "
umount "$M"
printf '%s %s shardfs world=2,_netdev 0 0\n' "$T/src" "$M" > "$T/fstab"
mount -T "$T/fstab" -a
expect_eq "fstab: mount -a" "$?:$(ls "$M" | tr '\n' ' ')" "0:0 1 "
umount "$M"
mountpoint -q "$M" && bad "umount left it mounted" || ok

# man pages where man(1) finds them
for page in shardfs shardfs-index shardfs-plan shardfs-check shardfs-mkdata; do
	out=$(MANPATH=/usr/local/share/man man -P cat "$page" 2>/dev/null | grep -c "^NAME")
	expect_eq "man $page" "$out" 1
done

# bad options: the daemon's message, through mount(8)
for t in shardfs fuse.shardfs; do
	out=$(mount -t "$t" "$T/src" "$M" -o world=0 2>&1)
	rc=$?
	[ "$rc" -ne 0 ] && [[ "$out" == *"shardfs: world=0 is out of range: use an integer in 1..65536"* ]] && ok ||
		bad "mount -t $t -o world=0: status $rc, message: $out"
	mountpoint -q "$M" && bad "mount -t $t mounted a bad option" || ok
done
out=$(mount -t shardfs "$T/src" "$M" -o world=2,rank=5 2>&1)
[[ "$out" == *"shardfs: rank=5 is out of range for world=2: ranks are 0..1"* ]] && ok || bad "rank=5 through mount(8): $out"
finish
