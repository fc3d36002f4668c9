#!/usr/bin/env bash
# What a user who names the source, the index or the epochs must not be
# able to do to a mount (docs/security.md): a comma in a path adds no FUSE
# option, an index= that is not there is refused, old epochs held open are
# bounded, and a reader cannot make the control files cost the daemon a
# rebuild per stat.
. "$(dirname "$0")/lib.sh"
M=$T/m

shardfs-mkdata "$T/tar" --format tar --shards 6 --samples 5-20 --size 1-300 --seed 51 >/dev/null
shardfs-index "$T/tar" --quiet

# mount_ok NAME SRC: SRC mounts, the auditor passes, the mount says SRC
# and carries no allow_other nor default_permissions
mount_ok() {
	local name=$1 src=$2 want=${3:-$2} out
	if ! mount_view "$src" "$M" world=2,workers=2; then
		bad "$name: mounts"
		return
	fi
	out=$(shardfs-check view "$M")
	expect_eq "$name: auditor passes" "$?:$(echo "$out" | tail -1)" \
		"0:PASS: disjoint, nothing missing, equal counts, every sample's bytes and order as planned"
	expect_eq "$name: the mount's source" "$(findmnt -no SOURCE "$M")" "$want"
	expect_eq "$name: no allow_other in /proc/mounts" \
		"$(awk -v m="$M" '$2 == m {print $4}' /proc/mounts | tr , '\n' | grep -cE '^(allow_other|default_permissions)$')" 0
	unmount_view "$M"
}

# --- a comma in the source path is part of the path, not an option ---
mkdir -p "$T/d"
cp -r "$T/tar" "$T/d/ds,allow_other"
shardfs-index "$T/d/ds,allow_other" --quiet
mount_ok "a source named ds,allow_other" "$T/d/ds,allow_other"
ln -s "ds,allow_other" "$T/d/current"
mount_ok "a symlink to it" "$T/d/current" "$T/d/ds,allow_other"
cp -r "$T/tar" "$T/d/set,v2"
shardfs-index "$T/d/set,v2" --quiet
mount_ok "a source named set,v2" "$T/d/set,v2"
cp -r "$T/tar" "$T/d/oct\\054allow_other\\"
shardfs-index "$T/d/oct\\054allow_other\\" --quiet
mount_ok "a backslash and an octal escape" "$T/d/oct\\054allow_other\\"
printf '%s\n' '{"sources": [{"path": "ds,allow_other", "name": "ds", "proportion": 1}, {"path": "set,v2", "name": "set", "proportion": 1}]}' \
	> "$T/d/m,allow_other"
mount_ok "a mixture file named m,allow_other" "$T/d/m,allow_other"

# --- index= names a directory that must be there ---
refuse() {
	local name=$1 want=$2
	shift 2
	expect_run "$name" 1 "$want" -- shardfs "$@"
	mountpoint -q "$M" && { bad "$name: mounted anyway"; unmount_view "$M"; } || ok
}
refuse "index= that does not exist" \
	"shardfs: index=$T/nonexistent/typo: No such file or directory: give the directory shardfs-index $T/tar --out DIR wrote, or leave index= out to use $T/tar/.shardfs" \
	"$T/tar" "$M" -o index="$T/nonexistent/typo"
refuse "index= a file" \
	"shardfs: index=$T/tar/shard-000000.tar: not a directory: give the directory shardfs-index $T/tar --out DIR wrote, or leave index= out to use $T/tar/.shardfs" \
	"$T/tar" "$M" -o index="$T/tar/shard-000000.tar"
mkdir -p "$T/emptyidx"
refuse "index= an empty directory" \
	"shardfs: $T/emptyidx/manifest.json: no index; build it with: shardfs-index $T/tar --out $T/emptyidx" \
	"$T/tar" "$M" -o index="$T/emptyidx"
shardfs-index "$T/tar" --out "$T/idx" --quiet
mount_view "$T/tar" "$M" index="$T/idx" || bad "index= that is there: mounts"
expect_eq "index= that is there: status says it" \
	"$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["index"])' "$M/.shardfs/status")" "$T/idx"
unmount_view "$M"

finish
