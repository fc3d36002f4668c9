#!/usr/bin/env bash
# follow=1's log (docs/follow.md, "Restart and resume") on real mounts:
#   a. a chunk dated 1960: mount, unmount, remount: served (its time is a
#      negative number in the log, read back)
#   b. a torn last line of follow.log: the restart leaves it out (logged),
#      the next append starts on a line of its own, the next restart has
#      exactly the chunks written
#   c. a symlink planted as SRC/.shardfs/follow.log, then as SRC/.shardfs:
#      the file it names is neither created nor written, the status says
#      no log is kept, and the daemon serves (the line it logs at the mount,
#      naming the path and why, is asserted by test_log_symlink in
#      tests/unit/test_follow.c)
# Mounts and unmounts (tests/lib.sh); as root.
. "$(dirname "$0")/../../lib.sh"

FO="follow=1,follow_interval=1,follow_timeout=20,format=jsonl,window=2,world=1,workers=1"
# lines FILE: its lines, sorted, one a line (a read of the stream waits
# for the end marker, 20 s at most)
lines() { timeout 30 sort "$1"; }
# status_log MNT: the log the daemon keeps, as its status says (None: none)
status_log() {
	timeout 10 python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["follow"]["log"])' "$1/.shardfs/status"
}
# wait_file PATH: until it exists (10 s at most)
wait_file() {
	local i
	for i in $(seq 100); do
		[ -e "$1" ] && return 0
		sleep 0.1
	done
	return 1
}

echo "== a. a chunk dated 1960"
S=$T/a
mkdir -p "$S"
printf 'a\nb\n' > "$S/c0.jsonl"
touch -d 1960-01-01 "$S/c0.jsonl"
mount_view "$S" "$T/a-m" "$FO" || bad "mount a"
expect_eq "a: served" "$(timeout 10 cat "$T/a-m/0/0/window-00000000.jsonl")" "a
b"
unmount_view "$T/a-m"
expect_eq "a: logged with a negative time" \
	"$(cut -d' ' -f1,2,4 "$S/.shardfs/follow.log"; cut -d' ' -f3 "$S/.shardfs/follow.log" | tail -1 | cut -c1)" \
	"shardfs-follow 1
2 4 c0.jsonl
-"
mount_view "$S" "$T/a-m2" "$FO" || bad "remount a"
expect_eq "a: served after the remount" \
	"$(timeout 10 cat "$T/a-m2/0/0/window-00000000.jsonl")" "a
b"
unmount_view "$T/a-m2"

echo "== b. a torn last line"
S=$T/b
mkdir -p "$S"
printf 'a\nb\n' > "$S/c0.jsonl"
printf 'c\nd\n' > "$S/c1.jsonl"
mount_view "$S" "$T/b-m" "$FO" || bad "mount b"
wait_file "$T/b-m/0/0/window-00000001.jsonl" || bad "b: window 1"
unmount_view "$T/b-m"
printf '2 4 17' >> "$S/.shardfs/follow.log" # an append cut short
printf 'e\nf\n' > "$S/c2.jsonl"
mount_view "$S" "$T/b-m2" "$FO" || bad "remount b"
expect_eq "b: the log kept" "$(status_log "$T/b-m2")" "$S/.shardfs/follow.log"
wait_file "$T/b-m2/0/0/window-00000002.jsonl" || bad "b: window 2"
printf 'g\nh\n' > "$S/c3.jsonl.tmp" # a producer's write, then rename
mv "$S/c3.jsonl.tmp" "$S/c3.jsonl"
wait_file "$T/b-m2/0/0/window-00000003.jsonl" || bad "b: window 3"
unmount_view "$T/b-m2"
expect_eq "b: the log names exactly the chunks, each on its own line" \
	"$(cut -d' ' -f1,2,4 "$S/.shardfs/follow.log")" "shardfs-follow 1
2 4 c0.jsonl
2 4 c1.jsonl
2 4 c2.jsonl
2 4 c3.jsonl"
mount_view "$S" "$T/b-m3" "$FO,start=4" || bad "remount b at start=4"
touch "$S/.shardfs-end"
expect_eq "b: start=4 serves exactly c2 and c3" \
	"$(lines "$T/b-m3/0/0/stream.jsonl")" "e
f
g
h"
unmount_view "$T/b-m3"

echo "== c. symlinks planted as the log and as its directory"
S=$T/c
mkdir -p "$S/.shardfs" "$T/c-away"
printf 'a\nb\n' > "$S/c0.jsonl"
printf 'secret\n' > "$T/c-away/kept"
chmod 600 "$T/c-away/kept"
ln -s "$T/c-away/made" "$S/.shardfs/follow.log"
mount_view "$S" "$T/c-m" "$FO" || bad "mount c"
touch "$S/.shardfs-end"
expect_eq "c: served through a planted follow.log" \
	"$(lines "$T/c-m/0/0/stream.jsonl")" "a
b"
expect_eq "c: the status says the log is not kept" "$(status_log "$T/c-m")" None
unmount_view "$T/c-m"
expect_eq "c: the file the symlink names is not created" \
	"$(ls "$T/c-away")" "kept"
rm "$S/.shardfs/follow.log"
ln -s "$T/c-away/kept" "$S/.shardfs/follow.log"
mount_view "$S" "$T/c-m2" "$FO" || bad "mount c, a symlink to a file"
expect_eq "c: served" "$(lines "$T/c-m2/0/0/stream.jsonl")" "a
b"
unmount_view "$T/c-m2"
expect_eq "c: the file the symlink names is untouched" \
	"$(cat "$T/c-away/kept"; stat -c '%a %s' "$T/c-away/kept")" "secret
600 7"
rm -r "$S/.shardfs"
ln -s "$T/c-away" "$S/.shardfs"
mount_view "$S" "$T/c-m3" "$FO" || bad "mount c, .shardfs a symlink"
expect_eq "c: served with .shardfs a symlink" \
	"$(lines "$T/c-m3/0/0/stream.jsonl")" "a
b"
expect_eq "c: the status says the log is not kept (.shardfs)" \
	"$(status_log "$T/c-m3")" None
unmount_view "$T/c-m3"
expect_eq "c: nothing made in the directory .shardfs names" \
	"$(ls "$T/c-away")" "kept"

expect_eq "nothing of this test left mounted" \
	"$(awk -v t="$T" 'index($2, t) == 1' /proc/mounts | wc -l)" 0
finish
