#!/usr/bin/env bash
# follow=1 and users who are not the training job (docs/follow.md,
# docs/security.md "follow=1: the second review"): the modes of the
# source on the view's files, progress= beneath its directory, the log of
# the first scan, names that are not UTF-8, consumption by
# acknowledgement only.  Mounts through tests/lib.sh (each
# unmounted by its path on any exit); reads as uid 65534 with allow_other.
# As root (/dev/fuse).
. "$(dirname "$0")/../../lib.sh"
PY=/usr/bin/python3
FO="follow=1,follow_timeout=60,format=jsonl"
as_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
stat_of() { stat -c '%a %u:%g' "$1"; }
section() { printf '== %s\n' "$*"; }
chmod 755 "$T"

section "modes: a view file carries the modes of the shards it serves"
mkdir -p "$T/m"
printf '{"a":0}\n{"a":1}\n' > "$T/m/c0.jsonl"
printf '{"b":0}\n{"b":1}\n' > "$T/m/c1.jsonl"
chmod 644 "$T/m/c0.jsonl"
chmod 600 "$T/m/c1.jsonl"
chmod 755 "$T/m"
touch "$T/m/.shardfs-end"
mount_view "$T/m" "$T/m-m" "$FO,window=2,allow_other" || bad "mount m"
d=$T/m-m/0/0
expect_eq "m: a window of a 644 shard is 444 root's" \
	"$(stat_of "$d/window-00000000.jsonl")" "444 0:0"
expect_eq "m: a window of a 600 shard is 400 root's" \
	"$(stat_of "$d/window-00000001.jsonl")" "400 0:0"
expect_eq "m: the stream (both shards) is 400 root's" \
	"$(stat_of "$d/stream.jsonl")" "400 0:0"
expect_eq "m: another user reads the 644 shard's window" \
	"$(as_nobody cat "$d/window-00000000.jsonl")" '{"a":0}
{"a":1}'
expect_run "m: another user cannot read the 600 shard's window" 1 \
	"cat: $d/window-00000001.jsonl: Permission denied" \
	-- as_nobody cat "$d/window-00000001.jsonl"
expect_run "m: another user cannot read the stream" 1 \
	"cat: $d/stream.jsonl: Permission denied" \
	-- as_nobody cat "$d/stream.jsonl"
expect_eq "m: the owner (root) reads the stream" "$(cat "$d/stream.jsonl")" \
	'{"a":0}
{"a":1}
{"b":0}
{"b":1}'
unmount_view "$T/m-m"
# one window of both shards: the classes that may read both
mount_view "$T/m" "$T/m-m" "$FO,window=4,allow_other" || bad "mount m 4"
expect_eq "m: a window of a 644 and a 600 shard is 400 root's" \
	"$(stat_of "$d/window-00000000.jsonl")" "400 0:0"
expect_run "m: another user cannot read it" 1 \
	"cat: $d/window-00000000.jsonl: Permission denied" \
	-- as_nobody cat "$d/window-00000000.jsonl"
unmount_view "$T/m-m"
# a 644 shard in a 700 source: others kept out by the directory
mkdir -p "$T/m7"
printf '{"c":0}\n{"c":1}\n' > "$T/m7/c0.jsonl"
chmod 644 "$T/m7/c0.jsonl"
chmod 700 "$T/m7"
touch "$T/m7/.shardfs-end"
mount_view "$T/m7" "$T/m7-m" "$FO,window=2,allow_other" || bad "mount m7"
d=$T/m7-m/0/0
expect_eq "m7: a 644 shard in a 700 source: its window is 400 root's" \
	"$(stat_of "$d/window-00000000.jsonl")" "400 0:0"
expect_run "m7: another user cannot read it" 1 \
	"cat: $d/window-00000000.jsonl: Permission denied" \
	-- as_nobody cat "$d/window-00000000.jsonl"
unmount_view "$T/m7-m"
# a stream opened before a private shard comes: its read of that window
# is refused, the public window before it served
mkdir -p "$T/mo"
chmod 755 "$T/mo"
mount_view "$T/mo" "$T/mo-m" "$FO,window=2,allow_other" || bad "mount mo"
d=$T/mo-m/0/0
as_nobody $PY -c '
import os, sys, time
fd = os.open(sys.argv[1], os.O_RDONLY)
print(os.read(fd, 100).decode(), end="")
try:
    os.read(fd, 100)
    print("read the private window")
except OSError as e:
    print(e.strerror)
' "$d/stream.jsonl" > "$T/mo-out" 2>&1 &
rp=$!
sleep 0.5
printf '{"p":0}\n{"p":1}\n' > "$T/mo/.c0.jsonl"
chmod 644 "$T/mo/.c0.jsonl"
mv "$T/mo/.c0.jsonl" "$T/mo/c0.jsonl"
sleep 0.5
printf '{"q":0}\n{"q":1}\n' > "$T/mo/.c1.jsonl"
chmod 600 "$T/mo/.c1.jsonl"
mv "$T/mo/.c1.jsonl" "$T/mo/c1.jsonl"
touch "$T/mo/.shardfs-end"
wait $rp
expect_eq "mo: a stream opened before: the public window, then EACCES" \
	"$(cat "$T/mo-out")" '{"p":0}
{"p":1}
Permission denied'
unmount_view "$T/mo-m"

section "progress=DIR: written beneath DIR, never through a symlink"
mkdir -p "$T/p" "$T/p-dir"
chmod 1777 "$T/p-dir"
printf '{"a":0}\n{"a":1}\n' > "$T/p/c0.jsonl"
touch "$T/p/.shardfs-end"
echo "root's file" > "$T/victim"
echo "root's other file" > "$T/victim2"
# planted by another user in the (world-writable) progress directory
as_nobody ln -s "$T/victim" "$T/p-dir/rank-0.json.tmp"
as_nobody ln -s "$T/victim2" "$T/p-dir/rank-0.json"
mount_view "$T/p" "$T/p-m" "$FO,window=2,progress=$T/p-dir" || bad "mount p"
ln -s "$T/p-dir" "$T/p-link"
for i in $(seq 100); do
	[ -f "$T/p-dir/rank-0.json" ] && [ ! -L "$T/p-dir/rank-0.json" ] && break
	sleep 0.05
done
expect_eq "p: the files the symlinks point at are unchanged" \
	"$(cat "$T/victim" "$T/victim2")" "root's file
root's other file"
expect_eq "p: progress is written, a file in place of the symlink" \
	"$(stat -c %F "$T/p-dir/rank-0.json"): $(cat "$T/p-dir/rank-0.json")" \
	'regular file: {"rank":0,"consumed":null,"windows_read":0,"ended":true}'
expect_eq "p: no temporary file left" "$(ls -A "$T/p-dir" | grep -v '^rank-0.json' | tr '\n' ' ')" ""
unmount_view "$T/p-m"
expect_run "p: a progress= directory that is a symlink is refused" 1 \
	"shardfs: progress=$T/p-link: cannot open the directory (Not a directory): create it; a symlink is not followed" \
	-- timeout 10 shardfs "$T/p" "$T/p-m" -f -o "$FO,window=2,progress=$T/p-link"

section "the first scan's notes go where the log goes (-f: stderr)"
mkdir -p "$T/l"
printf '{"a":0}\n{"a":1}\n' > "$T/l/c0.jsonl"
printf 'not a tfrecord' > "$T/l/c1.tfrecord"
mount_view "$T/l" "$T/l-m" "$FO,window=2" || bad "mount l"
expect_eq "l: the refusal of the first scan is in the daemon's stderr" \
	"$(grep -c 'c1.tfrecord' "${daemon_log[$T/l-m]}")" 1
unmount_view "$T/l-m"

section "shard names that are not UTF-8 in the status and progress="
mkdir -p "$T/u" "$T/u-p"
printf '{"a":0}\n{"a":1}\n' > "$T/u/a"$'\xff'".jsonl"
printf '{"b":0}\n{"b":1}\n' > "$T/u/b%.jsonl"
touch "$T/u/.shardfs-end"
mount_view "$T/u" "$T/u-m" "$FO,window=2,progress=$T/u-p" || bad "mount u"
# window 0 (the non-UTF-8 shard) consumed
echo "0 0 0" > "$T/u-m/.shardfs/ack"
names() {
	$PY -c '
import json, sys, urllib.parse
s = json.load(open(sys.argv[1] + "/.shardfs/status"))
p = json.load(open(sys.argv[2] + "/rank-0.json"))
f = s["follow"]
print(f["last_shard"], f["consumed"], p["consumed"],
      urllib.parse.unquote_to_bytes(f["last_shard"]),
      urllib.parse.unquote_to_bytes(p["consumed"]))' "$1" "$2" 2>&1
}
for i in $(seq 100); do
	[ "$(names "$T/u-m" "$T/u-p" | cut -d' ' -f3)" = "a%FF.jsonl" ] && break
	sleep 0.05
done
expect_eq "u: the status and progress name the shards, escaped" \
	"$(names "$T/u-m" "$T/u-p")" \
	"b%25.jsonl a%FF.jsonl a%FF.jsonl b'b%.jsonl' b'a\\xff.jsonl'"
expect_eq "u: shardfs.follow.shard_name gives the file's name back" \
	"$(PYTHONPATH=$TESTS/../python $PY -c '
import json, os, sys
from shardfs import follow
s = json.load(open(sys.argv[1] + "/.shardfs/status"))
n = follow.shard_name(s["follow"]["consumed"])
print(n in os.listdir(sys.argv[2]), os.fsencode(n))' "$T/u-m" "$T/u")" \
	"True b'a\\xff.jsonl'"
expect_eq "u: consumed (plain text) holds the name's bytes" \
	"$(cat "$T/u-m/.shardfs/consumed")" "a"$'\xff'".jsonl"
expect_eq "u: no failed progress write logged" \
	"$(grep -c 'cannot write' "${daemon_log[$T/u-m]}")" 0
unmount_view "$T/u-m"
section "consumption: only acknowledgements move it, never reads"
mkdir -p "$T/c" "$T/c-p"
chmod 755 "$T/c"
for c in 0 1 2; do
	for l in 0 1 2 3; do printf '{"c":%d,"l":%d}\n' "$c" "$l"; done \
		> "$T/c/chunk_0000$c.jsonl"
done
touch "$T/c/.shardfs-end"
mount_view "$T/c" "$T/c-m" "$FO,window=4,workers=2,allow_other,progress=$T/c-p" ||
	bad "mount c"
expect_eq "c: the auditor reads every file and passes" \
	"$(shardfs-check view "$T/c-m" | tail -1)" \
	"PASS: disjoint, nothing missing, equal counts, every sample's bytes and order as planned"
for w in 0 1; do
	as_nobody cat "$T/c-m/0/$w/stream.jsonl" "$T/c-m/0/$w"/window-* >/dev/null
	cat "$T/c-m/0/$w/stream.jsonl" "$T/c-m/0/$w"/window-* >/dev/null
done
expect_eq "c: the auditor, another user and root read everything: nothing consumed" \
	"$(cat "$T/c-m/.shardfs/consumed")" ""
expect_run "c: another user cannot acknowledge" 2 \
	"sh: 1: cannot create $T/c-m/.shardfs/ack: Permission denied" \
	-- as_nobody sh -c "echo '0 0 2' > $T/c-m/.shardfs/ack"
expect_eq "c: ack is 644 root's" "$(stat_of "$T/c-m/.shardfs/ack")" "644 0:0"
echo "0 0 1" > "$T/c-m/.shardfs/ack"
expect_eq "c: one reader's ack: nothing consumed" \
	"$(cat "$T/c-m/.shardfs/consumed")" ""
echo "0 1 0" > "$T/c-m/.shardfs/ack"
expect_eq "c: both readers acknowledged window 0: its shard consumed" \
	"$(cat "$T/c-m/.shardfs/consumed")" "chunk_00000.jsonl"
echo "0 1 0" > "$T/c-m/.shardfs/ack"
echo "0 0 0" > "$T/c-m/.shardfs/ack"
expect_eq "c: acks only move forward" "$(cat "$T/c-m/.shardfs/consumed")" \
	"chunk_00000.jsonl"
for bad_ack in "0 2 0" "1 0 0" "0 0 3" "0 0" "0 0 1 1" " 0 0 1" "0 0 -1" \
	"0 0 99999999999999999999" "x"; do
	expect_run "c: ack '$bad_ack' refused" 1 \
		"sh: 1: echo: echo: I/O error" \
		-- sh -c "echo '$bad_ack' > $T/c-m/.shardfs/ack"
done
expect_eq "c: each refusal logged with the write and the form expected" \
	"$(grep -c 'refused a write to .shardfs/ack (".*"): .*; write "RANK WORKER WINDOW\\n"' "${daemon_log[$T/c-m]}")" 9
expect_eq "c: the refusals say why" \
	"$(grep -o 'refused a write to .shardfs/ack ("[^"]*"): [^;]*' "${daemon_log[$T/c-m]}" | head -3)" \
	'refused a write to .shardfs/ack ("0 2 0"): rank 0 worker 2 is no reader this mount serves
refused a write to .shardfs/ack ("1 0 0"): rank 1 worker 0 is no reader this mount serves
refused a write to .shardfs/ack ("0 0 3"): window 3 is not complete (the last complete one is 2)'
PYTHONPATH=$TESTS/../python $PY -c '
import sys
from shardfs import follow
follow.acknowledge(sys.argv[1], 0, 0, 2)
got = list(follow.windows(sys.argv[1], 0, 1))
print(len(got))
' "$T/c-m" > "$T/c-py" 2>&1
expect_eq "c: the Python helper: windows() gives reader 0/1 its 3 windows" \
	"$(cat "$T/c-py")" "3"
expect_eq "c: every window acknowledged by both: the last shard consumed" \
	"$(cat "$T/c-m/.shardfs/consumed")" "chunk_00002.jsonl"
expect_eq "c: progress= says so" "$(cat "$T/c-p/rank-0.json")" \
	'{"rank":0,"consumed":"chunk_00002.jsonl","windows_read":3,"ended":true}'
unmount_view "$T/c-m"

section "status: built when it changes, not at every stat"
mkdir -p "$T/s"
mount_view "$T/s" "$T/s-m" "$FO,window=4096,world=256,workers=16" ||
	bad "mount s"
# 4096 readers: ~480 KB of JSON, which was built at every stat (12 ms
# and more each); 300 stats took 3.6 s and more.  Now a text is built
# only when its stream or a counter changed: a stat costs what one of a
# small status does, also in a sanitizer build (2.7 s there before)
took=$($PY -c '
import os, sys, time
p = sys.argv[1] + "/.shardfs/status"
t = time.monotonic()
for _ in range(300):
    os.stat(p)
print("%.2f" % (time.monotonic() - t))' "$T/s-m")
echo "300 stats of the status at world=256 x workers=16: $took s"
expect_eq "s: 300 stats of a 4096-reader status take under a second" \
	"$($PY -c 'import sys; print(float(sys.argv[1]) < 1.0)' "$took")" True
expect_eq "s: its size is stable and it parses (4096 readers)" \
	"$($PY -c '
import json, os, sys
p = sys.argv[1] + "/.shardfs/status"
a = os.stat(p).st_size
print(a == os.stat(p).st_size, len(json.load(open(p))["readers"]))' "$T/s-m")" "True 4096"
unmount_view "$T/s-m"

section "a big chunk is scanned outside the lock reads take"
mkdir -p "$T/b"
$PY -c 'import sys; open(sys.argv[1], "wb").write(b"0\n" * 1000000)' "$T/b/c0.jsonl"
mount_view "$T/b" "$T/b-m" "$FO,window=1000000" || bad "mount b"
# 12 M samples (24 MB): about half a second of scan and layout here;
# reads of window 0 waited for all of it (1.0 s of 1.15 s), now ~10 ms
out=$(timeout 120 $PY "$TESTS/mount/follow/scan_stall.py" "$T/b" "$T/b-m" 12000000)
echo "$out"
expect_eq "b: reads of a complete window are not blocked by the scan" \
	"$(tail -1 <<<"$out")" OK
unmount_view "$T/b-m"

section "reads that wait hold no thread"
mkdir -p "$T/w"
printf '{"a":0}\n{"a":1}\n' > "$T/w/c0.jsonl"
mount_view "$T/w" "$T/w-m" "$FO,window=2" || bad "mount w"
# 80 reads wait for window 1 (more than the daemon's 64 request
# threads); a read of the complete window 0 answered only at their
# follow_timeout= before; then the stream ends and they get their EOF
out=$(timeout 100 $PY "$TESTS/mount/follow/many_waiters.py" "$T/w" "$T/w-m" 80 2>&1)
echo "$out"
expect_eq "w: a read of a complete window answers at once" \
	"$(sed -n 2p <<<"$out")" fast
expect_eq "w: the 80 waiting reads get their EOF once the stream ends" \
	"$(sed -n 3p <<<"$out")" "80 of 80 waiting reads ended: ['0']"
unmount_view "$T/w-m"
# a waiting read whose reader is killed is let go (interrupted)
mkdir -p "$T/wi"
mount_view "$T/wi" "$T/wi-m" "$FO,window=2" || bad "mount wi"
timeout 1 cat "$T/wi-m/0/0/stream.jsonl"
expect_eq "wi: a killed reader's read is let go: nobody waits" \
	"$(sleep 0.3; $PY -c 'import json, sys; print(json.load(open(sys.argv[1]))["readers"][0]["waiting"])' "$T/wi-m/.shardfs/status")" False
unmount_view "$T/wi-m"

expect_eq "nothing of this test left mounted" \
	"$(awk -v t="$T" 'index($2, t) == 1' /proc/mounts | wc -l)" 0
finish
