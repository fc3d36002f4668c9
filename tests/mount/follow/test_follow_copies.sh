#!/usr/bin/env bash
# follow=1 (docs/follow.md): a file opened in one copy of the view that
# grows (fs_view_grow) and opened again in the next.  The cached entry of
# the old copy is rebuilt (files.c); a review found that the entry it
# let go kept the table's next pointer, so that the entry after it in
# the same hash bucket was freed too while still in the table (a
# use-after-free on the next open: seen by a sanitizer build, whose
# daemon aborts; unmount_view checks its exit and log).  The table has
# 2048 buckets by node number: window files 2048 nodes apart share one.
# Then a directory held open while the view grows 50 times: a review
# found that each copy held the one it grew into, so that the copy the
# directory was opened in kept every later one alive (51 views in the
# status); only it and the current one may live.
# Mounts and unmounts (tests/lib.sh).
. "$(dirname "$0")/../../lib.sh"

S=$T/src
M=$T/m
W=$M/0/0
mkdir -p "$S"
seq 2100 | sed 's/.*/{"id": &}/' > "$S/.c0.jsonl.tmp"
mv "$S/.c0.jsonl.tmp" "$S/c0.jsonl"
mount_view "$S" "$M" "follow=1,follow_interval=1,follow_timeout=30,format=jsonl,window=1,world=1,workers=1" ||
	bad "mount"
for i in $(seq 100); do
	[ -e "$W/window-00002099.jsonl" ] && break
	sleep 0.1
done
# two window files whose nodes (an inode's low 32 bits) share a bucket
pair=$(stat -c '%i %n' "$W"/window-*.jsonl | awk '{
	k = ($1 % 4294967296) % 2048
	if (k in seen) { print seen[k], $2; exit }
	seen[k] = $2 }')
read -r a b <<<"$pair"
expect_eq "two window files share a bucket" "$([ -n "$b" ] && echo yes)" yes
# their entries, built in the first copy: b's after a's in the bucket
expect_eq "window a reads" "$(timeout 10 cat "$a")" "$(sed -n 1p "$a")"
expect_eq "window b reads" "$(timeout 10 wc -l < "$b")" 1
# the view grows: a second copy; the first lives while a directory
# opened in it is open, and with it its entries
exec 3<"$W"
echo '{"id": 2101}' > "$S/.c1.jsonl.tmp"
mv "$S/.c1.jsonl.tmp" "$S/c1.jsonl"
for i in $(seq 100); do
	[ -e "$W/window-00002100.jsonl" ] && break
	sleep 0.1
done
# b opened in the new copy: its entry rebuilt; then a's entry found
expect_eq "window b reads in the grown view" \
	"$(timeout 10 wc -l < "$b")" 1
expect_eq "window a reads in the grown view" "$(timeout 10 wc -l < "$a")" 1
expect_eq "window b reads again" "$(timeout 10 wc -l < "$b")" 1
exec 3<&-

# wait_views N: until the status counts N views (5 s at most; the kernel
# releases a closed directory after the close returns)
wait_views() {
	local i
	for i in $(seq 50); do
		[ "$(counter "$M" views)" = "$1" ] && return
		sleep 0.1
	done
}
wait_views 1
expect_eq "the directory closed: one view" "$(counter "$M" views)" 1
# a directory open while the view grows 50 times, one window at a time
# (chunks d002 .. d051: their names sort after c1's, in order)
exec 3<"$W"
for k in $(seq 2 51); do
	c=d$(printf %03d "$k").jsonl
	echo "{\"id\": $((2100 + k))}" > "$S/.$c.tmp"
	mv "$S/.$c.tmp" "$S/$c"
	for i in $(seq 100); do
		[ -e "$W/window-0000$((2099 + k)).jsonl" ] && break
		sleep 0.05
	done
done
expect_eq "the view grew 50 times" \
	"$(ls "$W" | tail -1)" window-00002150.jsonl
wait_views 2
expect_eq "a directory open over 50 grows: its copy and the current" \
	"$(counter "$M" views)" 2
# its listing is still the copy it was opened in: the stream and windows
# 0 .. 2100
expect_eq "the directory open lists what it was opened with" \
	"$(python3 -c 'import os; print(len(os.listdir(3)))')" 2102
expect_eq "a new listing lists the current copy" "$(ls "$W" | wc -l)" 2152
exec 3<&-
wait_views 1
expect_eq "the directory closed again: one view" "$(counter "$M" views)" 1
unmount_view "$M"

expect_eq "nothing of this test left mounted" \
	"$(awk -v t="$T" 'index($2, t) == 1' /proc/mounts | wc -l)" 0
finish
