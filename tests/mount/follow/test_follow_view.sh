#!/usr/bin/env bash
# follow=1 (docs/follow.md, "What readers see"): a followed source's files
# have what a view's have.
#   a. its directories answer readdirplus: `ls -l` of a worker's directory
#      takes no lookup of its entries, and shows the windows' exact sizes
#      and the stream's size now, also right after it grew
#   b. window files and streams carry extended attributes, as a view's
#      files do: the shards a window reads, its samples as the stream's
#      sample numbers, its padding, its window (epoch); a stream's source
#      and its samples so far
# Mounts and unmounts (tests/lib.sh); as root.
. "$(dirname "$0")/../../lib.sh"

# shard DIR NAME FIRST: 4 samples of 9 bytes ({"i":FIRST} ... FIRST+3,
# two digits each), written under a temporary name, then renamed
shard() {
	local i
	for i in 0 1 2 3; do printf '{"i":%02d}\n' $(($3 + i)); done >"$1/.$2.tmp"
	mv "$1/.$2.tmp" "$1/$2"
}
# requests MNT FROM OPCODE [NODEID]: requests of OPCODE (of inode NODEID)
# in MNT's daemon log (-d) after its line FROM
requests() {
	tail -n +"$(($2 + 1))" "${daemon_log[$1]}" |
		grep -c "opcode: $3 ([0-9]*), nodeid: ${4:-[0-9]*},"
}
# worker 0 of rank 0: its directory's inode (follow_i.h: K_WORKER << 60)
WORKER_INO=$((2 << 60))

printf '== a. readdirplus\n'
mkdir -p "$T/a"
shard "$T/a" c0.jsonl 0
shard "$T/a" c1.jsonl 4
DAEMON_FLAGS=-d mount_view "$T/a" "$T/a-m" "follow=1,window=4" ||
	bad "mount a"
W=$T/a-m/0/0
stat "$W" >/dev/null
from=$(wc -l <"${daemon_log[$T/a-m]}")
expect_eq "a: ls -l shows the windows' and the stream's exact sizes" \
	"$(ls -l "$W" | awk 'NR > 1 { print $5, $NF }')" \
	"72 stream.jsonl
36 window-00000000.jsonl
36 window-00000001.jsonl"
expect_eq "a: the listing was a readdirplus" \
	"$(requests "$T/a-m" "$from" READDIRPLUS $WORKER_INO | grep -qv '^0$' && echo yes)" yes
expect_eq "a: and the kernel looked up none of its entries" \
	"$(requests "$T/a-m" "$from" LOOKUP $WORKER_INO)" 0
# the stream grows: the size the listing gave is not kept
shard "$T/a" c2.jsonl 8
for i in $(seq 100); do
	[ -e "$W/window-00000002.jsonl" ] && break
	sleep 0.1
done
expect_eq "a: once a window more is there, stat shows the stream's new size" \
	"$(stat -c '%s %n' "$W/stream.jsonl")" "108 $W/stream.jsonl"
expect_eq "a: and so does ls -l" \
	"$(ls -l "$W" | awk 'NR > 1 { print $5, $NF }')" \
	"108 stream.jsonl
36 window-00000000.jsonl
36 window-00000001.jsonl
36 window-00000002.jsonl"
expect_eq "a: the windows' bytes" \
	"$(cat "$W"/window-* | sort | tr -d '\n')" \
	'{"i":00}{"i":01}{"i":02}{"i":03}{"i":04}{"i":05}{"i":06}{"i":07}{"i":08}{"i":09}{"i":10}{"i":11}'
unmount_view "$T/a-m"

printf '== b. extended attributes\n'
mkdir -p "$T/b"
shard "$T/b" c0.jsonl 0
shard "$T/b" c1.jsonl 4
printf '{"i":08}\n{"i":09}\n{"i":10}\n' >"$T/b/c2.jsonl"
touch "$T/b/.shardfs-end"
# interleaved, unshuffled: reader 0 takes the even samples, reader 1 the
# odd ones; the last window's 3 samples give reader 1 one of padding
mount_view "$T/b" "$T/b-m" \
	"follow=1,window=8,workers=2,shuffle=none,partition=interleaved" ||
	bad "mount b"
# xattrs FILE: its user.shardfs attributes, as getfattr dumps them
xattrs() { getfattr --absolute-names -d -m - "$1" | tail -n +2; }
expect_eq "b: reader 0's window 0 reads c0 and c1, samples 0,2,4,6" \
	"$(tr -d '\n' <"$T/b-m/0/0/window-00000000.jsonl"; echo; xattrs "$T/b-m/0/0/window-00000000.jsonl")" \
	"{\"i\":00}{\"i\":02}{\"i\":04}{\"i\":06}
user.shardfs.epoch=\"0\"
user.shardfs.padding=\"0\"
user.shardfs.range=\"0,2,4,6\"
user.shardfs.samples=\"4\"
user.shardfs.source=\"$T/b/c0.jsonl\\012$T/b/c1.jsonl\""
expect_eq "b: reader 1's last window: sample 8 again as padding" \
	"$(tr -d '\n' <"$T/b-m/0/1/window-00000001.jsonl"; echo; xattrs "$T/b-m/0/1/window-00000001.jsonl")" \
	"{\"i\":09}{\"i\":08}
user.shardfs.epoch=\"1\"
user.shardfs.padding=\"1\"
user.shardfs.range=\"9,8\"
user.shardfs.samples=\"2\"
user.shardfs.source=\"$T/b/c2.jsonl\""
expect_eq "b: one attribute's value, as a loader asks for it" \
	"$(getfattr --absolute-names --only-values -n user.shardfs.source "$T/b-m/0/0/window-00000000.jsonl")" \
	"$T/b/c0.jsonl
$T/b/c1.jsonl"
expect_eq "b: a stream: its source and its samples in the windows so far" \
	"$(xattrs "$T/b-m/0/1/stream.jsonl")" \
	"user.shardfs.padding=\"1\"
user.shardfs.samples=\"6\"
user.shardfs.source=\"$T/b\""
expect_eq "b: a stream has no range, a directory no attribute" \
	"$(getfattr --absolute-names -n user.shardfs.range "$T/b-m/0/0/stream.jsonl" 2>&1; xattrs "$T/b-m/0/0")" \
	"$T/b-m/0/0/stream.jsonl: user.shardfs.range: No such attribute"
unmount_view "$T/b-m"

expect_eq "nothing of this test left mounted" \
	"$(awk -v t="$T" 'index($2, t) == 1' /proc/mounts | wc -l)" 0
finish
