#!/usr/bin/env bash
# The file system, mounted for real: every format over a grid of settings
# checked byte for byte against the source; real tools on the slices;
# directory order, links, provenance, epoch switches, odd reads, mmap,
# cp -a, and every refusal.
. "$(dirname "$0")/../lib.sh"
check="$TESTS/mount/check_view.py"

# --- datasets ---
shardfs-mkdata "$T/tar" --format tar --shards 9 --samples 1-40 --size 0-700 --seed 11
shardfs-mkdata "$T/tar" --format tar --shards 2 --samples 6 --long-names --seed 12 2>/dev/null
mv "$T/tar/shard-000000.tar" "$T/tar/long-000000.tar"
shardfs-mkdata "$T/tar" --format tar --shards 9 --samples 1-40 --size 0-700 --seed 11
python3 - "$T/tar/global.tar" <<'PY'
import io, sys, tarfile
with tarfile.open(sys.argv[1], "w", format=tarfile.PAX_FORMAT,
                  pax_headers={"comment": "global"}) as t:
    for i in range(7):
        for ext, size in ((".jpg", 512), (".cls", 0)):
            info = tarfile.TarInfo("g%03d%s" % (i, ext))
            info.size = size
            t.addfile(info, io.BytesIO(bytes([i]) * size))
PY
shardfs-mkdata "$T/jsonl" --format jsonl --shards 6 --samples 3-30 --seed 13
printf '{"crlf": 1}\r\n{"crlf": 2}\r\n{"last": "no newline"}' > "$T/jsonl/tail.jsonl"
shardfs-mkdata "$T/tfrecord" --format tfrecord --shards 5 --samples 2-25 --seed 14
shardfs-mkdata "$T/files" --format files --shards 4 --samples 3-9 --members 1-3 --seed 15
for d in tar jsonl tfrecord; do shardfs-index "$T/$d" --quiet; done
shardfs-index "$T/files" --format files --quiet

# --- every format, several settings: the view is the plan, byte for byte ---
grid=(
	"tar world=2,workers=2"
	"tar world=3,workers=2,remainder=drop,batch=4,shuffle=samples,block=7,start=11,epoch=3"
	"tar world=1,workers=4,shuffle=none,block=5"
	"tar world=2,workers=3,symlinks=0,seed=9"
	"tar world=2,workers=2,splice=0,readahead=0"
	"jsonl world=2,workers=3,shuffle=samples"
	"jsonl world=4,remainder=drop,batch=2,start=5,block=4"
	"tfrecord world=2,workers=2,block=3"
	"tfrecord world=5,shuffle=none,batch=3"
	"files world=2,workers=2"
	"files world=3,remainder=drop,symlinks=0"
)
for g in "${grid[@]}"; do
	fmt=${g%% *} opts=${g#* }
	if mount_view "$T/$fmt" "$T/mnt" "$opts"; then
		out=$(python3 "$check" "$T/mnt" "$fmt")
		expect_eq "$fmt $opts: view = plan, byte for byte" "$?" 0 || echo "$out" >&2
		unmount_view "$T/mnt"
	else
		bad "$fmt $opts: mount"
	fi
done

# --- the read path: the daemon bounds read requests (FUSE max_read) by
# what libfuse's pipe can splice, so every read of a source's bytes is
# spliced; splice=0 copies them all, and copied_reads counts those
# (docs/view.md, "The read path"); the mount's read-ahead is the
# default's ---
shardfs-mkdata "$T/big" --format tar --shards 1 --samples 40 --size 200000 --seed 16
shardfs-index "$T/big" --quiet
pipe=$(cat /proc/sys/fs/pipe-max-size) size=$(stat -c %s "$T/big/shard-000000.tar")
for o in splice=1 splice=0 max_read=65536; do
	opts=world=1,workers=1,symlinks=0,$o
	mount_view "$T/big" "$T/mnt" "$opts" || { bad "$opts: mount"; continue; }
	f=$(ls -d "$T/mnt/0/0"/*)
	expect_eq "$opts: the whole shard, byte for byte" \
		"$(cmp "$f" "$T/big/shard-000000.tar" && echo same)" same
	expect_eq "$opts: the mount's read-ahead, KiB" \
		"$(cat "/sys/class/bdi/$(mountpoint -d "$T/mnt")/read_ahead_kb")" 1008
	max_read=$(awk -v m="$T/mnt" '$2 == m' /proc/mounts | grep -o 'max_read=[0-9]*')
	reads=$(counter "$T/mnt" reads) copied=$(counter "$T/mnt" copied_reads)
	case $o in
	splice=1)
		expect_eq "$opts: max_read, what the pipe splices" "$max_read" \
			"max_read=$(((pipe - 16384) / 4096 * 4096))"
		expect_eq "$opts: no read copied (of $reads)" "$copied" 0
		expect_eq "$opts: reads of at most max_read" \
			"$((reads >= size / ${max_read#max_read=}))" 1 ;;
	splice=0)
		expect_eq "$opts: max_read, the kernel's" "$max_read" ""
		expect_eq "$opts: every read copied" "$copied" "$reads" ;;
	max_read=*)
		expect_eq "$opts: max_read, the user's" "$max_read" "$o"
		expect_eq "$opts: no read copied (of $reads)" "$copied" 0
		expect_eq "$opts: reads of at most 64 KiB" "$((reads >= size / 65536))" 1 ;;
	esac
	unmount_view "$T/mnt"
done
# a read of max_read bytes over many extents (a sample each, shuffled)
# does not fit libfuse's pipe beside a page a piece: it is copied by the
# daemon (counted; a short source answers EIO), not by libfuse's fallback,
# which would send a short source's bytes short
shardfs-mkdata "$T/many" --format tar --shards 1 --samples 200 --size 20000 --seed 16
shardfs-index "$T/many" --quiet
mount_view "$T/many" "$T/mnt" world=1,workers=1,symlinks=0,shuffle=samples ||
	bad "shuffle=samples: mount"
f=$(ls -d "$T/mnt/0/0"/* | head -1)
max_read=$(awk -v m="$T/mnt" '$2 == m' /proc/mounts | grep -o 'max_read=[0-9]*')
reads=$(counter "$T/mnt" reads) copied=$(counter "$T/mnt" copied_reads)
dd if="$f" of="$T/first" bs="${max_read#max_read=}" count=1 iflag=direct status=none ||
	bad "shuffle=samples: dd iflag=direct"
expect_eq "shuffle=samples: one read of max_read, copied" \
	"$(($(counter "$T/mnt" reads) - reads)) $(($(counter "$T/mnt" copied_reads) - copied)) $(stat -c %s "$T/first")" \
	"1 1 ${max_read#max_read=}"
expect_eq "shuffle=samples: its bytes are the file's" \
	"$(cmp -n "${max_read#max_read=}" "$T/first" "$f" && echo same)" same
unmount_view "$T/mnt"
# a read of max_read bytes over two extents: libfuse counts the reply's
# 16-byte header in what its pipe must hold, so it does not fit either
# (a pipe cannot grow past pipe-max-size without CAP_SYS_RESOURCE) and
# is copied by the daemon.  Samples of whole pages, shuffled: every full
# read with a sample boundary inside is two extents.
shardfs-mkdata "$T/two" --format tar --shards 1 --samples 6 --members 1 --size 1547776 --seed 17
shardfs-index "$T/two" --quiet
mount_view "$T/two" "$T/mnt" world=1,workers=1,symlinks=0,shuffle=samples ||
	bad "two extents: mount"
f=$(ls -d "$T/mnt/0/0"/* | head -1)
max_read=$(awk -v m="$T/mnt" '$2 == m' /proc/mounts | grep -o 'max_read=[0-9]*')
max_read=${max_read#max_read=}
want=$(awk -v m="$max_read" -v s=1548288 -v size="$(stat -c %s "$f")" \
	'BEGIN { for (o = 0; o + m <= size; o += m) n += int((o + m - 1) / s) > int(o / s); print n }')
copied=$(counter "$T/mnt" copied_reads)
dd if="$f" of="$T/two.out" bs="$max_read" iflag=direct status=none ||
	bad "two extents: dd iflag=direct"
expect_eq "two extents: the full reads over two are copied" \
	"$(($(counter "$T/mnt" copied_reads) - copied))" "$want"
expect_eq "two extents: bytes" "$(cmp "$T/two.out" "$f" && echo same)" same
unmount_view "$T/mnt"

# --- one tar mount for the rest ---
M="$T/m"
mount_view "$T/tar" "$M" world=2,workers=2,block=6 || { bad "mount"; finish; exit 1; }

# real tools read every slice without a word
n=0
for f in "$M"/*/*/*; do
	[ -L "$f" ] && continue
	n=$((n + 1))
	expect_run "GNU tar -tf $(basename "$f")" 0 "" -- tar -tf "$f"
	expect_run "bsdtar -tf $(basename "$f")" 0 "" -- bsdtar -tf "$f"
	rm -rf "$T/x" && mkdir "$T/x"
	expect_run "GNU tar -xf $(basename "$f")" 0 "" -- tar -xf "$f" -C "$T/x"
done
[ "$n" -gt 5 ] && ok || bad "too few slices to read: $n"

# every way of listing gives the plan's order
d="$M/1/0"
plan_names=$(python3 - "$M" <<'PY'
import json, sys
plan = json.load(open(sys.argv[1] + "/.shardfs/plan.json"))
files = plan["readers"][2]["files"]
print("\n".join(f["shard"] for f in files))
PY
)
expect_eq "ls order" "$(ls "$d" | sed 's/^[0-9]*-//; s/\.[0-9]*-[0-9]*\.tar$/.tar/')" "$plan_names"
expect_eq "ls -f order" "$(ls -f "$d" | grep -v '^\.\.\?$')" "$(ls "$d")"
expect_eq "find order" "$(find "$d" -mindepth 1 -printf '%f\n')" "$(ls "$d")"
expect_eq "os.listdir order" "$(python3 -c 'import os,sys; print("\n".join(sorted(os.listdir(sys.argv[1]))))' "$d")" "$(ls "$d")"

# links and provenance
link=$(find "$M" -type l | head -1)
expect_eq "readlink is the source shard" "$(readlink "$link")" "$T/tar/$(basename "$link" | sed 's/^[0-9]*-//')"
slice=$(find "$M/0/0" -type f | head -1)
shard=$(basename "$slice" | sed 's/^[0-9]*-//; s/\.\([0-9]*\)-\([0-9]*\)\.tar$/.tar/')
range=$(basename "$slice" | sed 's/.*\.\([0-9]*\)-\([0-9]*\)\.tar$/\1-\2/')
expect_eq "xattr source" "$(getfattr --absolute-names --only-values -n user.shardfs.source "$slice")" "$T/tar/$shard"
expect_eq "xattr range" "$(getfattr --absolute-names --only-values -n user.shardfs.range "$slice")" "$range"
expect_eq "xattr samples" "$(getfattr --absolute-names --only-values -n user.shardfs.samples "$slice")" "$(( ${range#*-} - ${range%-*} + 1 ))"
expect_eq "xattr list" "$(getfattr --absolute-names -d -m - "$slice" | grep -c '^user.shardfs')" 5
# Python's open() buffers st_blksize bytes: a page, as on a local disk;
# the mode is the shard's read bits, less what $T (700) keeps out
expect_eq "a slice's mode, links and I/O size" "$(stat -c '%A %h %o' "$slice")" "-r-------- 1 4096"

# odd reads: 1 byte, across extents, past the end; mmap
expect_eq "odd reads and mmap" "$(python3 - "$slice" <<'PY'
import mmap, os, sys
path = sys.argv[1]
whole = open(path, "rb").read()
fd = os.open(path, os.O_RDONLY)
bad = 0
for off in list(range(0, len(whole), 509)) + [len(whole) - 1024, len(whole) - 1]:
    for size in (1, 511, 513, 4096, 70000):
        bad += os.pread(fd, size, off) != whole[off:off + size]
bad += os.pread(fd, 10, len(whole)) != b""
bad += os.pread(fd, 10, len(whole) + 12345) != b""
with mmap.mmap(fd, 0, prot=mmap.PROT_READ) as m:
    bad += m[:] != whole
print("ok" if bad == 0 and len(whole) == os.fstat(fd).st_size else "bad %d" % bad)
PY
)" ok

# cp -a of a whole rank directory
cp -a "$M/0" "$T/copy"
expect_run "cp -a copy equals the view" 0 "" -- diff -r "$M/0" "$T/copy"

# the epoch: a switch changes the order, keeps the samples, spares open files
# the distinct samples of the plan being served, and how many are padding
samples_of() { python3 -c '
import hashlib, json, sys
p = json.load(open(sys.argv[1] + "/.shardfs/plan.json"))
s = {"%s:%d" % (f["shard"], a + k) for x in p["readers"] for f in x["files"]
     for a, c in f["runs"] for k in range(c)}
print(len(s), hashlib.sha256(" ".join(sorted(s)).encode()).hexdigest(), p["padding"])' "$1"; }
before_ls=$(ls "$M/0/0")
before_samples=$(samples_of "$M")
exec 7<"$slice"
before_bytes=$(sha256sum < "$slice")
echo 1 > "$M/.shardfs/epoch"
expect_eq "epoch reads back" "$(cat "$M/.shardfs/epoch")" 1
[ "$(ls "$M/0/0")" != "$before_ls" ] && ok || bad "epoch 1 lists the same order"
expect_eq "epoch 1 has the same samples" "$(samples_of "$M")" "$before_samples"
expect_eq "an open file keeps its epoch" "$(sha256sum <&7)" "$before_bytes"
exec 7<&-
out=$(python3 "$check" "$M" tar)
expect_eq "epoch 1 view = plan" "$?" 0 || echo "$out" >&2
slice=$(find "$M/0/0" -type f | head -1)
for w in abc -1 18446744073709551616 "1 2" ""; do
	expect_run "epoch write '$w' refused" 1 \
		"bash: line 1: echo: write error: Invalid argument" \
		-- bash -c "echo '$w' > '$M/.shardfs/epoch'"
done
expect_eq "a refused write changes nothing" "$(cat "$M/.shardfs/epoch")" 1

# a working directory in an old epoch keeps that epoch whole (the kernel
# still holds its inodes); old views go once nothing holds them (the
# kernel's forgets arrive on their own time: wait for them, 5 s at most)
settle_views() {
	local i
	for i in $(seq 50); do [ "$(counter "$M" views)" == "$1" ] && break; sleep 0.1; done
	counter "$M" views
}
old_ls=$(ls "$M/1/1")
old_first=$(ls "$M/1/1" | head -1)
old_sum=$(sha256sum < "$M/1/1/$old_first")
# (there getcwd fails, as in a removed directory: the old names are gone
# from the tree; the complaints of settle_views' children are dropped)
got=$(cd "$M/1/1" && echo 2 > "$M/.shardfs/epoch" && echo 3 > "$M/.shardfs/epoch" &&
	ls && sha256sum < "$old_first" && settle_views 2 2>/dev/null)
expect_eq "a working directory two epochs back lists and reads its epoch" "$got" "$old_ls
$old_sum
2"
[ "$(ls "$M/1/1")" != "$old_ls" ] && ok || bad "epoch 3 lists epoch 1's order"
echo 1 > "$M/.shardfs/epoch"
expect_eq "old views are let go once nothing holds them" "$(settle_views 1)" 1
ino=$(stat -c %i "$slice")
echo 1 > "$M/.shardfs/epoch"
expect_eq "writing the served epoch keeps the tree" "$(stat -c %i "$slice")" "$ino"
expect_eq "status counts the switch, not the rewrite" "$(counter "$M" epoch_switches)" 5
# 0 -> 1 -> 2 -> 3 took the view built ahead; 3 -> 1 cancelled the build
# of 4 and built its own (the view = plan checks above ran on both kinds)
expect_eq "three switches to the next epoch took its view built ahead" "$(counter "$M" switches_ahead)" 3

# a listing of the root opened in epoch 1 and read in epoch 2 lists the
# ranks, and leaves their names leading to epoch 2 (its entries carry no
# lookup: a readdirplus of epoch 1's ranks after the switch would make
# the kernel keep them, and serve epoch 1 under epoch 2's names)
echo 2 > "$M/.shardfs/epoch"
epoch2_ls=$(ls "$M/0/0")
echo 1 > "$M/.shardfs/epoch"
ls "$M/0/0" >/dev/null
got=$(python3 - "$M" <<'PY'
import os
import sys
mnt = sys.argv[1]
fd = os.open(mnt, os.O_RDONLY | os.O_DIRECTORY)
with open(os.path.join(mnt, ".shardfs", "epoch"), "w") as f:
    f.write("2")
print(" ".join(sorted(os.listdir(fd))))
os.close(fd)
PY
)
expect_eq "a root listing opened in epoch 1, read in epoch 2" "$got" ".shardfs 0 1"
expect_eq "after it, the ranks list epoch 2" "$(ls "$M/0/0")" "$epoch2_ls"
echo 1 > "$M/.shardfs/epoch"

# read-only everywhere but the control file
for cmd in "touch $M/0/0/new" "mkdir $M/0/x" "rm $slice" "mv $slice $M/0/0/y" \
	"chmod 600 $slice" "ln -s /etc $M/0/l" "cp /etc/hostname $M/1/" "setfattr -n user.x -v 1 $slice"; do
	out=$($cmd 2>&1)
	[ $? -ne 0 ] && [[ "$out" == *"Read-only file system"* ]] && ok || bad "not refused with EROFS: $cmd ($out)"
done
out=$( (echo x > "$slice") 2>&1)
[[ "$out" == *"Read-only file system"* ]] && ok || bad "write to a slice: $out"
unmount_view "$M"
mountpoint -q "$M" && bad "still mounted" || ok
expect_eq "the daemon logged the refused writes" "$(grep -c 'refused a write to .shardfs/epoch' "${daemon_log[$M]}")" 5

# --- more options ---
mount_view "$T/tar" "$M" world=4,workers=1,rank=1,3 || bad "mount rank=1,3"
expect_eq "rank=1,3 shows two ranks" "$(ls "$M")" "1
3"
unmount_view "$M"
mount_view "$T/tar" "$M" world=2,workers=2,epochs=3,epoch=8 || bad "mount epochs=3"
expect_eq "epochs=3: three epochs, in order" "$(ls "$M/0/0" | cut -c1-2 | uniq | tr '\n' ' ')" "08 09 10 "
counts=$(for e in 08 09 10; do getfattr --absolute-names --only-values -n user.shardfs.samples "$M"/0/0/$e-* 2>/dev/null | tr -d '\n'; echo; done)
# a loader that lists once sees the three: nothing is built ahead, even
# after a switch (the switch joins any build ahead: this is not a race)
echo 11 > "$M/.shardfs/epoch"
echo 12 > "$M/.shardfs/epoch"
expect_eq "epochs=3: no view built ahead" "$(counter "$M" switches_ahead):$(counter "$M" ahead)" "0:None"
unmount_view "$M"
mount_view "$T/tar" "$M" world=2,workers=2,symlinks=0 || bad "mount symlinks=0"
expect_eq "symlinks=0: no links" "$(find "$M" -type l | wc -l)" 0
unmount_view "$M"

# a name identifies its bytes: over 100 epochs of mounts with other
# options, every path that appears again hashes the same (small shards, so
# that the names meet often)
shardfs-mkdata "$T/small" --format jsonl --shards 2 --samples 5 --seed 16
shardfs-index "$T/small" --quiet
for opts in shuffle=samples world=2,shuffle=samples,block=3 \
	world=2,shuffle=samples,partition=interleaved,batch=3 block=2; do
	mount_view "$T/small" "$M" "$opts" || bad "mount $opts"
	for e in $(seq 0 99); do
		echo "$e" > "$M/.shardfs/epoch"
		(cd "$M" && find . -path ./.shardfs -prune -o -type f -print0 |
			xargs -0 sha256sum) >> "$T/names.sha"
	done
	unmount_view "$M"
done
expect_eq "a name identifies its bytes" \
	"$(sort -u "$T/names.sha" | awk '{print $2}' | sort | uniq -d)" ""
[ "$(awk '{print $2}' "$T/names.sha" | sort | uniq -d | wc -l)" -gt 20 ] &&
	ok || bad "too few names appear again for the check to mean anything"

# replicas: the ranks of a group read the same names and bytes
mount_view "$T/tar" "$M" world=6,workers=2,replicas=3,block=5 || bad "mount replicas=3"
for r in 1 2; do
	expect_eq "replicas: rank $r reads what rank 0 reads" \
		"$(cd "$M/$r" && find . | sort | xargs -d '\n' sha256sum 2>/dev/null)" \
		"$(cd "$M/0" && find . | sort | xargs -d '\n' sha256sum 2>/dev/null)"
done
[ "$(cd "$M/3" && find . -type f | sort | xargs cat | sha256sum)" != "$(cd "$M/0" && find . -type f | sort | xargs cat | sha256sum)" ] &&
	ok || bad "replicas: rank 3 (another group) reads what rank 0 reads"
expect_eq "replicas: status" "$(python3 -c 'import json,sys; o=json.load(open(sys.argv[1]))["options"]; print(o["replicas"], o["world"])' "$M/.shardfs/status")" "3 6"
unmount_view "$M"

# single-threaded: epoch switches while another process keeps listing
DAEMON_FLAGS=-s mount_view "$T/tar" "$M" world=2,workers=2 || bad "mount -s"
( for i in $(seq 200); do ls "$M" "$M"/0/0 > /dev/null 2>&1; done ) &
lister=$!
for e in 1 2 3 4 5 6 7 8; do
	timeout 10 bash -c "echo $e > '$M/.shardfs/epoch'" || bad "-s: epoch switch $e hung or failed"
done
wait "$lister"
expect_eq "-s: the last epoch is served" "$(cat "$M/.shardfs/epoch")" 8
out=$(python3 "$check" "$M" tar)
expect_eq "-s: view = plan after switches" "$?" 0 || echo "$out" >&2
expect_eq "-s: the switches took the views built ahead" "$(counter "$M" switches_ahead)" 8
unmount_view "$M"

# ahead=0: each switch builds its view, and none is built ahead
mount_view "$T/tar" "$M" world=2,workers=2,ahead=0 || bad "mount ahead=0"
echo 1 > "$M/.shardfs/epoch" && echo 2 > "$M/.shardfs/epoch"
out=$(python3 "$check" "$M" tar)
expect_eq "ahead=0: view = plan after switches" "$?" 0 || echo "$out" >&2
expect_eq "ahead=0: no view built ahead" "$(counter "$M" switches_ahead):$(counter "$M" ahead)" "0:None"
unmount_view "$M"

# no index: built in memory, with a warning, nothing written to the source
cp -r "$T/jsonl" "$T/noindex" && rm -rf "$T/noindex/.shardfs"
mount_view "$T/noindex" "$M" world=2 || bad "mount without an index"
expect_eq "no index: warning" "$(head -1 "${daemon_log[$M]}")" "shardfs: warning: no index for $T/noindex; building one in memory (no hashes, not saved). Build it once with: shardfs-index $T/noindex"
[ ! -e "$T/noindex/.shardfs" ] && ok || bad "no index: wrote into the source"
out=$(python3 "$check" "$M" jsonl)
expect_eq "no index: view = plan" "$?" 0 || echo "$out" >&2
unmount_view "$M"

# a shard changed behind the index: its files fail with EIO and a log
# line, the others keep working
cp -a "$T/tfrecord" "$T/changing"
mount_view "$T/changing" "$M" world=1,workers=1,block=2,shuffle=none || bad "mount changing"
first=$(ls -d "$M"/0/0/* | head -1)
other=$(ls -d "$M"/0/0/* | grep -v "shard-000000\." | head -1)
echo "appended" >> "$T/changing/shard-000000.tfrecord"
size=$(stat -c %s "$T/changing/shard-000000.tfrecord")
expect_run "changed shard: EIO" 1 "cat: $first: Input/output error" -- cat "$first"
expect_eq "changed shard: logged" "$(grep -c "shard-000000.tfrecord changed since it was indexed (size $size, the index says $((size - 9))" "${daemon_log[$M]}")" 1
expect_eq "other shards still read" "$(cat "$other" | wc -c)" "$(stat -c %s "$other")"
unmount_view "$M"

# SIGTERM unmounts cleanly, exit 0
mount_view "$T/tar" "$M" world=2 || bad "mount for SIGTERM"
kill -TERM "${daemon_pid[$M]}"
wait "${daemon_pid[$M]}"
expect_eq "SIGTERM: exit 0" "$?" 0
mountpoint -q "$M" && bad "SIGTERM: still mounted" || ok

# --- refusals, before anything is mounted ---
refuse() {
	local name=$1 want=$2
	shift 2
	expect_run "$name" 1 "$want" -- shardfs "$@"
	mountpoint -q "$M" && { bad "$name: mounted anyway"; unmount_view "$M"; } || ok
}
refuse "world=0" "shardfs: world=0 is out of range: use an integer in 1..65536" "$T/tar" "$M" -o world=0
refuse "rank=8" "shardfs: rank=8 is out of range for world=8: ranks are 0..7" "$T/tar" "$M" -o world=8,rank=8
refuse "epochs=0" "shardfs: epochs=0 is out of range: use an integer in 1..1000" "$T/tar" "$M" -o epochs=0
refuse "symlinks=2" "shardfs: symlinks=2 is out of range: use an integer in 0..1" "$T/tar" "$M" -o symlinks=2
refuse "shuffle=yes" "shardfs: shuffle=yes is not valid: use none | units | samples" "$T/tar" "$M" -o shuffle=yes
refuse "replicas=4 of world=6" "shardfs: replicas=4 does not divide world=6: every group of replicas holds the same number of ranks; use a divisor of 6" "$T/tar" "$M" -o world=6,replicas=4
refuse "a typo of a plan option" 'shardfs: unknown option "wrld" (did you mean "world"?)' "$T/tar" "$M" -o wrld=2
refuse "max_read= not a number" "shardfs: max_read=1k is not a number: use an integer in 1..4294967295" "$T/tar" "$M" -o world=2,max_read=1k
refuse "a typo of a daemon option" 'shardfs: unknown option "symlink" (did you mean "symlinks"?)' "$T/tar" "$M" -o world=2,symlink=0
refuse "index= empty" "shardfs: index= is empty: give the index directory" "$T/tar" "$M" -o index=
n=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["samples"])' "$T/jsonl/.shardfs/manifest.json")
refuse "drop to nothing" "shardfs: remainder=drop leaves 0 samples per reader: $n samples for world=4096 × workers=1; use remainder=pad or fewer readers" \
	"$T/jsonl" "$M" -o world=4096,remainder=drop
refuse "no mount point" "shardfs: usage: shardfs SRC MNT [-o OPTIONS]; see shardfs --help" "$T/tar"
echo '{"x": 1}' >> "$T/jsonl/shard-000002.jsonl"
size=$(stat -c %s "$T/jsonl/shard-000002.jsonl")
refuse "stale index" "shardfs: the index is stale: 1 shard file changed since it was built: shard-000002.jsonl (size $size, the index says $((size - 9))); rebuild it with: shardfs-index $T/jsonl" \
	"$T/jsonl" "$M"
finish
