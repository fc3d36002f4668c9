#!/usr/bin/env bash
# Who may read a file of the view (issue 30): a slice, or a whole shard
# served as a file (symlinks=0), has the owner and group the source gives
# its shard and its read bits, less what the directories on the shard's
# path keep out,
# so that with allow_other (which brings default_permissions) the kernel
# refuses a user the samples of a shard that user cannot read in the
# source.  Symlinks lead to the source, whose own modes apply.
. "$(dirname "$0")/lib.sh"
M=$T/mnt
as_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }

# pub/ (755, its shard 644) and priv/ (700, its shard 600), both root's
chmod 755 "$T"
mkdir -p "$T/src/pub" "$T/src/priv"
shardfs-mkdata "$T/src/pub" --shards 1 --samples 40 --seed 1 >/dev/null
shardfs-mkdata "$T/src/priv" --shards 1 --samples 40 --seed 2 >/dev/null
chmod 755 "$T/src" "$T/src/pub"
chmod 644 "$T/src/pub/shard-000000.tar"
chmod 700 "$T/src/priv"
chmod 600 "$T/src/priv/shard-000000.tar"
shardfs-index "$T/src" --quiet || bad "index"

# stat_of PATH: "mode owner:group" as stat says
stat_of() { stat -c '%a %u:%g' "$1"; }

for links in 0 1; do
	O="world=1,workers=1,block=20,shuffle=none,symlinks=$links,allow_other"
	mount_view "$T/src" "$M" "$O" || bad "mount $O"
	d=$M/0/0
	# in path order: priv/'s two slices, then pub/'s
	priv=$(ls -d "$d"/000000-*)
	pub=$(ls -d "$d"/000002-*)
	expect_eq "symlinks=$links: the names" "${priv#$d/} ${pub#$d/}" \
		"000000-priv%2Fshard-000000.0-19.tar 000002-pub%2Fshard-000000.0-19.tar"
	expect_eq "symlinks=$links: a slice of priv/ is 400 root's" "$(stat_of "$priv")" "400 0:0"
	expect_eq "symlinks=$links: a slice of pub/ is 444 root's" "$(stat_of "$pub")" "444 0:0"
	expect_run "symlinks=$links: another user cannot read priv/'s samples" 1 \
		"cat: $priv: Permission denied" -- as_nobody cat "$priv"
	expect_eq "symlinks=$links: another user reads pub/'s samples" \
		"$(as_nobody cat "$pub" | cmp - "$pub" && echo same)" same
	expect_eq "symlinks=$links: the owner (root) reads priv/'s" \
		"$(cat "$priv" | wc -c)" "$(stat -c %s "$priv")"
	unmount_view "$M"
done

# a whole shard served as a file (symlinks=0): the shard's read bits
O="world=1,workers=1,shuffle=none,symlinks=0,allow_other"
mount_view "$T/src" "$M" "$O" || bad "mount $O"
priv=$(ls -d "$M"/0/0/000000-*)
expect_eq "a whole shard of priv/ is 400 root's" "$(stat_of "$priv")" "400 0:0"
expect_run "another user cannot read a whole shard of priv/" 1 \
	"cat: $priv: Permission denied" -- as_nobody cat "$priv"
unmount_view "$M"

# a shard readable by its mode behind a directory others cannot search:
# others are kept out of the view too; chmod it back, and mount again,
# and they are let in
chmod 644 "$T/src/priv/shard-000000.tar"
mount_view "$T/src" "$M" "$O" || bad "mount $O"
expect_eq "a 644 shard in a 700 directory is 400 in the view" "$(stat_of "$priv")" "400 0:0"
unmount_view "$M"
chmod 755 "$T/src/priv"
mount_view "$T/src" "$M" "$O" || bad "mount $O"
expect_eq "a 644 shard in a 755 directory is 444 in the view" "$(stat_of "$priv")" "444 0:0"
expect_eq "another user reads it then" \
	"$(as_nobody cat "$priv" | cmp - "$priv" && echo same)" same
unmount_view "$M"

# the owner and group are the shard's
chown 65534:65534 "$T/src/pub/shard-000000.tar"
mount_view "$T/src" "$M" "$O" || bad "mount $O"
expect_eq "the owner and group are the shard's" \
	"$(stat_of "$(ls -d "$M"/0/0/000001-*)")" "444 65534:65534"
unmount_view "$M"

finish
