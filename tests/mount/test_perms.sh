#!/usr/bin/env bash
# Who may read a file of the view (issue 30): a slice, or a whole shard
# served as a file (symlinks=0), has the owner and group the source gives
# its shard and its read bits, less what the directories on the shard's
# path keep out,
# so that with allow_other (which brings default_permissions) the kernel
# refuses a user the samples of a shard that user cannot read in the
# source.  Symlinks lead to the source, whose own modes apply.
. "$(dirname "$0")/../lib.sh"
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

# Membership is not read, so a class whose members may be in a
# directory's class or not must pass both.  Real users and groups:
# alice owns the shards but is in neither group, bob is in G and G2,
# carol in G2 alone.
for g in sfs_perm_g sfs_perm_g2; do
	getent group $g >/dev/null || groupadd $g || bad "groupadd $g"
done
for u in sfs_perm_alice sfs_perm_bob sfs_perm_carol; do
	getent passwd $u >/dev/null ||
		useradd -M -N -g nogroup -s /usr/sbin/nologin $u ||
		bad "useradd $u"
done
usermod -G "" sfs_perm_alice
usermod -G sfs_perm_g,sfs_perm_g2 sfs_perm_bob
usermod -G sfs_perm_g2 sfs_perm_carol
# as USER CMD...: run as USER with the groups /etc/group gives it
as() {
	local u=$1
	shift
	setpriv --reuid="$u" --regid="$(id -g "$u")" --init-groups "$@"
}
alice=$(id -u sfs_perm_alice)
G=$(getent group sfs_perm_g | cut -d: -f3)
# a/ is 750 root:G, its shard alice:G 640: alice, an other to a/, cannot
# search it; b/ is 705 root:G2, its shard alice:G 644: bob and carol, of
# G2, cannot search it
S=$T/src2
mkdir -p "$S/a" "$S/b"
shardfs-mkdata "$S/a" --shards 1 --samples 40 --seed 3 >/dev/null
shardfs-mkdata "$S/b" --shards 1 --samples 40 --seed 4 >/dev/null
chmod 755 "$S"
chown root:sfs_perm_g "$S/a"
chmod 750 "$S/a"
chown root:sfs_perm_g2 "$S/b"
chmod 705 "$S/b"
chown sfs_perm_alice:sfs_perm_g "$S/a/shard-000000.tar" "$S/b/shard-000000.tar"
chmod 640 "$S/a/shard-000000.tar"
chmod 644 "$S/b/shard-000000.tar"
shardfs-index "$S" --quiet || bad "index $S"
expect_run "the source refuses alice a/'s shard" 1 \
	"cat: $S/a/shard-000000.tar: Permission denied" -- \
	as sfs_perm_alice cat "$S/a/shard-000000.tar"
expect_run "the source refuses bob b/'s shard" 1 \
	"cat: $S/b/shard-000000.tar: Permission denied" -- \
	as sfs_perm_bob cat "$S/b/shard-000000.tar"
expect_run "the source refuses carol b/'s shard" 1 \
	"cat: $S/b/shard-000000.tar: Permission denied" -- \
	as sfs_perm_carol cat "$S/b/shard-000000.tar"
mount_view "$S" "$M" "$O" || bad "mount $S $O"
a=$M/0/0/000000-a%2Fshard-000000.tar
b=$M/0/0/000001-b%2Fshard-000000.tar
# the owner does not own a/: it passes only if a/ lets both its group
# and others search; a/'s group (the file's) does
expect_eq "a/'s shard is 040 alice:G" "$(stat_of "$a")" "40 $alice:$G"
expect_run "the view refuses alice a/'s shard" 1 \
	"cat: $a: Permission denied" -- as sfs_perm_alice cat "$a"
expect_eq "bob, of G, reads a/'s shard" \
	"$(as sfs_perm_bob cat "$a" | cmp - "$S/a/shard-000000.tar" && echo same)" same
# b/'s group is not the file's: the file's group passes only if b/ lets
# both its group and others search, others only if b/'s group may
expect_eq "b/'s shard is 000 alice:G" "$(stat_of "$b")" "0 $alice:$G"
expect_run "the view refuses bob b/'s shard" 1 \
	"cat: $b: Permission denied" -- as sfs_perm_bob cat "$b"
expect_run "the view refuses carol b/'s shard" 1 \
	"cat: $b: Permission denied" -- as sfs_perm_carol cat "$b"
unmount_view "$M"

finish
