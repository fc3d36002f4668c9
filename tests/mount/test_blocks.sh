#!/usr/bin/env bash
# A mount reads only the blocks of the boundary table that its views need,
# each checked against the index's blocks file the first time: a damaged
# block that the first view needs refuses the mount, one that only a later
# epoch needs refuses the switch to that epoch (the write to the epoch file
# fails with EINVAL, the log names the block) and the view being served
# stays right.  An index without a blocks file (an older shardfs's) is
# checked whole at mount, as before.
. "$(dirname "$0")/../lib.sh"
M=$T/mnt
O="rank=0,world=2,workers=1,block=1000,shuffle=units"

# 8 shards of 1023 lines: shard i's 1024 boundaries are table entries
# 1024i..1024i+1023, blocks 2i and 2i+1 of 512 entries (4096 bytes)
shardfs-mkdata "$T/src" --format jsonl --shards 8 --samples 1023 --seed 7 >/dev/null
shardfs-index "$T/src" --quiet || bad "index"

# what the views read (sample ranges a-b read boundaries a..b+1): shard 1
# (blocks 2 and 3) in epoch 0; shard 4 not before epoch 2, and then only
# samples 1000-1022 (block 9)
views() {
	local e
	for e in "$@"; do
		echo "$e" > "$M/.shardfs/epoch" || return 1
		ls "$M/0/0" | sed "s/^[0-9]*-//" | LC_ALL=C sort | tr '\n' ' '
		echo
	done
}
epoch0="shard-000000.1000-1022.jsonl shard-000001.0-999.jsonl shard-000002.1000-1022.jsonl shard-000003.0-999.jsonl shard-000005.0-999.jsonl shard-000005.1000-1022.jsonl shard-000006.1000-1022.jsonl shard-000007.0-999.jsonl "
epoch1="shard-000001.0-999.jsonl shard-000002.0-999.jsonl shard-000002.1000-1022.jsonl shard-000003.1000-1022.jsonl shard-000005.0-999.jsonl shard-000005.1000-1022.jsonl shard-000006.1000-1022.jsonl shard-000007.0-999.jsonl "
epoch2="shard-000000.0-999.jsonl shard-000000.1000-1022.jsonl shard-000001.0-999.jsonl shard-000001.1000-1022.jsonl shard-000003.1000-1022.jsonl shard-000004.1000-1022.jsonl shard-000005.1000-1022.jsonl shard-000006.0-999.jsonl shard-000007.0-953.jsonl shard-000007.1000-1022.jsonl "
mount_view "$T/src" "$M" "$O" || bad "mount"
expect_eq "the slices of epochs 0, 1 and 2" "$(views 0 1 2)" \
	"$epoch0
$epoch1
$epoch2"
unmount_view "$M"

table=$(ls "$T/src/.shardfs"/samples-*.bin)
blocks=$(basename "$(ls "$T/src/.shardfs"/blocks-*.bin)")
cp -p "$table" "$T/table.good"
# damage BLOCK: one byte of it changed
damage() {
	cp -p "$T/table.good" "$table"
	printf 'Z' | dd of="$table" bs=1 seek=$((64 + 4096 * $1 + 9)) conv=notrunc status=none
}
# the message for block K
bad_block() {
	echo "$table: block $1 (bytes $((64 + 4096 * $1)) to $((64 + 4096 * $1 + 4095))) does not match its checksum in $blocks; the index is damaged: rebuild it with shardfs-index"
}

# --- a block the first view reads: the mount is refused ---
damage 2
expect_run "block 2 (epoch 0 reads it): the mount is refused" 1 \
	"shardfs: $(bad_block 2)" -- shardfs "$T/src" "$M" -o "$O"
mountpoint -q "$M" && { bad "mounted anyway"; fusermount3 -u "$M"; } || ok

# --- a block only epoch 2 reads: mounted, right, the switch refused ---
damage 9
mount_view "$T/src" "$M" "$O" || bad "mount with block 9 damaged"
expect_eq "epoch 0 served from the undamaged blocks" \
	"$(head -n 1000 "$T/src/shard-000001.jsonl" | cmp - "$M"/0/0/*-shard-000001.0-999.jsonl && echo same)" same
for i in $(seq 100); do [ "$(counter "$M" ahead)" == 1 ] && break; sleep 0.1; done
expect_eq "epoch 1 is built ahead" "$(counter "$M" ahead)" 1
expect_run "block 9 (epoch 2 reads it): the switch is refused" 1 \
	"bash: line 1: echo: write error: Invalid argument" \
	-- bash -c "echo 2 > '$M/.shardfs/epoch'"
expect_eq "the refusal names the block" \
	"$(grep -cxF "shardfs: refused epoch 2: $(bad_block 9)" "${daemon_log[$M]}")" 1
expect_eq "the epoch stays" "$(cat "$M/.shardfs/epoch")" 0
expect_eq "epoch 1 needs no damaged block" "$(views 1)" "$epoch1"
expect_eq "after the refused switch, epoch 1 is still built ahead" "$(counter "$M" switches_ahead)" 1
expect_eq "epoch 1 served right" \
	"$(sed -n 1001,1023p "$T/src/shard-000002.jsonl" | cmp - "$M"/0/0/*-shard-000002.1000-1022.jsonl && echo same)" same
# the auditor checks the whole table first
expect_run "shardfs-check view: the whole table checked" 2 \
	"shardfs-check: $(bad_block 9)" -- shardfs-check view "$M"
unmount_view "$M"

# --- an index without a blocks file: the whole table checked at mount ---
cp -p "$T/table.good" "$table"
python3 - "$T/src/.shardfs/manifest.json" <<'PY'
import hashlib, json, sys
m = json.load(open(sys.argv[1]))
del m["boundaries"]["blocks"], m["checksum"]
m["checksum"] = hashlib.sha256(json.dumps(m, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
open(sys.argv[1], "w").write(json.dumps(m, sort_keys=True, indent=1) + "\n")
PY
rm "$T/src/.shardfs/$blocks"
mount_view "$T/src" "$M" "$O" || bad "mount an index without a blocks file"
expect_eq "without a blocks file: the same views" "$(views 0 1 2)" \
	"$epoch0
$epoch1
$epoch2"
unmount_view "$M"
damage 9
expect_run "without a blocks file: block 9 damaged refuses the mount" 1 \
	"shardfs: $table: its contents do not match their checksum; the index is damaged: rebuild it with shardfs-index" \
	-- shardfs "$T/src" "$M" -o "$O"
mountpoint -q "$M" && { bad "mounted anyway"; fusermount3 -u "$M"; } || ok
finish
