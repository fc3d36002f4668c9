#!/usr/bin/env bash
# The prefetcher over slow storage: slowfs (tests/bench/slowfs.c, a FUSE
# pass-through with a latency per request) under a view.  With prefetch on,
# the view reads byte for byte as the source (slices, whole shards as files
# and as symlinks, a `files` tree); the status counts exactly what was read
# ahead; an epoch switch while prefetching serves the new epoch right; a
# shard gone is logged once and costs nothing else; a source that stalls is
# logged, and unmount returns within seconds however long the source takes;
# on a local source only the next file's start is asked for; reading the
# view leaves the source's pages cached; a chunk the source has cached
# already is not read again, and without cachestat every chunk is read; a
# view slow to build (Parquet over a slow source) says so in the log.
. "$(dirname "$0")/../lib.sh"
check="$TESTS/mount/check_view.py"
S=$T/slow M=$T/mnt
LAT=$T/latency

shardfs-mkdata "$T/tar" --format tar --shards 12 --samples 20 --size 1000-3000 --seed 21 >/dev/null
shardfs-mkdata "$T/files" --format files --shards 3 --samples 10 --members 1-2 --seed 22 >/dev/null
shardfs-index "$T/tar" --quiet
shardfs-index "$T/files" --format files --quiet

# slowfs over DIR on $S: 5 ms a request, or what $LAT says while it exists;
# OPTS add slowfs options.  The view above it goes first at exit: its
# daemon holds files of $S.
slow_mount() { mount_slowfs "$1" "$S" "latency=5,latency_file=$LAT${2:+,$2}"; }
slow_umount() { unmount_slowfs "$S"; }
on_exit() {
	rm -f "$LAT"
	if mountpoint -q "$M"; then fusermount3 -u "$M" || umount -l "$M"; fi
	[ -z "${daemon_pid[$M]:-}" ] || wait "${daemon_pid[$M]}" 2>/dev/null
	if [ -n "$slow_pid" ]; then
		fusermount3 -u "$S" || umount -l "$S"
		wait "$slow_pid"
	fi
	unmount_all
}
trap on_exit EXIT

# status MNT KEY: a prefetch counter, once it has stopped moving (1 s)
settled() {
	local a b i
	a=$(counter "$1" "$2")
	for i in $(seq 50); do
		sleep 0.2
		b=$(counter "$1" "$2")
		[ "$a" == "$b" ] && [ $((i % 5)) -eq 0 ] && break
		a=$b
	done
	echo "$a"
}
# files of reader 0/0 in plan order (names start with the sequence number)
reader_files() { ls -d "$1"/0/0/*; }
# ahead MNT: bytes read ahead, or found in the source's page cache and not
# read again
ahead() { echo $(($(counter "$1" prefetch_bytes) + $(counter "$1" prefetch_cached_bytes))); }

# --- the view over slowfs, prefetch on: the plan, byte for byte ---
slow_mount "$T/tar"
for o in "world=2,workers=2,block=7" "world=2,workers=2,symlinks=0" \
	"world=2,workers=3,shuffle=samples,block=5" "world=3,workers=2"; do
	mount_view "$S" "$M" "$o,prefetch_files=4,prefetch_threads=3" || bad "mount $o"
	out=$(python3 "$check" "$M" tar)
	expect_eq "over slowfs, $o: view = plan, byte for byte" "$?" 0 || echo "$out" >&2
	if [[ $o == *symlinks=0* ]]; then
		same=0
		for f in "$M"/*/*/*; do
			n=${f##*/}
			cmp -s "$f" "$T/tar/${n#*-}" && same=$((same + 1))
		done
		expect_eq "symlinks=0: every whole shard equals the local source" "$same" 12
	fi
	# after the first view the source is warm: chunks found cached count
	[ "$(ahead "$M")" -gt 0 ] && ok || bad "$o: nothing prefetched"
	expect_eq "$o: no prefetch errors" "$(counter "$M" prefetch_errors)" 0
	unmount_view "$M"
done
slow_umount
slow_mount "$T/files"
mount_view "$S" "$M" "world=2,workers=2,prefetch_files=3" || bad "mount files"
out=$(python3 "$check" "$M" files)
expect_eq "over slowfs, files tree: view = plan, byte for byte" "$?" 0 || echo "$out" >&2
unmount_view "$M"
slow_umount

# --- the counters: reading reader 0/0's 6 shards in order prefetches the
# 5 after the first, whole, once each; with symlinks (lookups, readlinks)
# as with files (opens).  Each on a fresh slowfs, nothing of it cached:
# a chunk is read, or found cached when the reader got there first ---
for links in 0 1; do
	[ -z "$slow_pid" ] || slow_umount
	slow_mount "$T/tar"
	mount_view "$S" "$M" "world=1,workers=2,shuffle=none,symlinks=$links,prefetch_files=2" || bad "mount"
	files=$(reader_files "$M")
	want=$(echo "$files" | tail -n +2 | xargs stat -L -c %s | awk '{s += $1} END {print s}')
	for f in $files; do cat "$f" > /dev/null; done
	expect_eq "symlinks=$links: files prefetched" "$(settled "$M" prefetch_files)" 5
	expect_eq "symlinks=$links: bytes prefetched" "$(ahead "$M")" "$want"
	expect_eq "symlinks=$links: no errors" "$(counter "$M" prefetch_errors)" 0
	expect_eq "symlinks=$links: nothing dropped" "$(counter "$M" prefetch_dropped)" 0
	unmount_view "$M"
done

# --- a chunk the source has cached is not read again (cachestat): a
# daemon over a warm slowfs skips the next files, counts them in
# prefetch_cached_bytes and reads nothing; over a fresh slowfs it reads
# them, and a file partly cached (its first page) is read whole ---
for pass in warm cold; do
	if [ $pass == cold ]; then
		slow_umount
		slow_mount "$T/tar"
	fi
	mount_view "$S" "$M" "world=1,workers=2,shuffle=none,symlinks=0,prefetch_files=2" || bad "mount"
	files=$(reader_files "$M")
	next=$(echo "$files" | sed -n 2,3p | xargs -n1 basename | sed 's/^[0-9]*-//')
	want=$(cd "$T/tar" && stat -c %s $next | awk '{s += $1} END {print s}')
	second=$S/$(echo "$next" | head -1)
	if [ $pass == warm ]; then
		cat "$S"/*.tar > /dev/null
		expect_eq "warm: the next files are cached" \
			"$(cd "$S" && fincore -b -n -o RES $next | awk '{s += $1} END {print s}')" \
			"$(cd "$T/tar" && stat -c %s $next | awk -v p="$(getconf PAGESIZE)" '{s += int(($1 + p - 1) / p) * p} END {print s}')"
	else
		# its first page alone: no read ahead
		python3 -c 'import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
os.pread(fd, 1, 0)' "$second"
		expect_eq "cold: the second file's first page alone is cached" \
			"$(($(fincore -b -n -o RES "$second")))" "$(getconf PAGESIZE)"
	fi
	cat "$(echo "$files" | head -1)" > /dev/null
	expect_eq "$pass: the next 2 files prefetched" "$(settled "$M" prefetch_files)" 2
	if [ $pass == warm ]; then
		expect_eq "warm: found cached, not read" \
			"$(counter "$M" prefetch_cached_bytes) $(counter "$M" prefetch_bytes)" "$want 0"
	else
		expect_eq "cold: read, partly cached too" \
			"$(counter "$M" prefetch_cached_bytes) $(counter "$M" prefetch_bytes)" "0 $want"
	fi
	expect_eq "$pass: no errors" "$(counter "$M" prefetch_errors)" 0
	unmount_view "$M"
done

# --- no cachestat (a seccomp filter answers ENOSYS, as an old kernel
# does): said once, and every chunk is read as before, warm or not ---
cat > "$T/nocachestat.py" <<'PY'
import ctypes, os, struct, sys
libc = ctypes.CDLL(None, use_errno=True)
# the syscall number (seccomp_data.nr): 451, cachestat, fails with ENOSYS
prog = b"".join(struct.pack("HBBI", *i) for i in (
    (0x20, 0, 0, 0), (0x15, 0, 1, 451),
    (0x06, 0, 0, 0x00050000 | 38), (0x06, 0, 0, 0x7fff0000)))
buf = ctypes.create_string_buffer(prog)
fprog = struct.pack("HxxxxxxP", 4, ctypes.addressof(buf))
fbuf = ctypes.create_string_buffer(fprog)
if libc.prctl(38, 1, 0, 0, 0) or libc.prctl(22, 2, fbuf, 0, 0):
    sys.exit("seccomp: %s" % os.strerror(ctypes.get_errno()))
os.execvp(sys.argv[1], sys.argv[1:])
PY
cat "$S"/*.tar > /dev/null
DAEMON_WRAP="python3 $T/nocachestat.py" mount_view "$S" "$M" "world=1,workers=2,shuffle=none,symlinks=0,prefetch_files=2" || bad "mount"
files=$(reader_files "$M")
next=$(echo "$files" | sed -n 2,3p | xargs -n1 basename | sed 's/^[0-9]*-//')
want=$(cd "$T/tar" && stat -c %s $next | awk '{s += $1} END {print s}')
cat "$(echo "$files" | head -1)" > /dev/null
expect_eq "no cachestat: the next 2 files prefetched" "$(settled "$M" prefetch_files)" 2
expect_eq "no cachestat: read again, though cached" \
	"$(counter "$M" prefetch_cached_bytes) $(counter "$M" prefetch_bytes)" "0 $want"
expect_eq "no cachestat: said once" "$(grep -c "^shardfs: prefetch: cachestat: Function not implemented; chunks already in the source's page cache are read again (Linux 6.5 or later, with the system call allowed, skips them)$" "${daemon_log[$M]}")" 1
unmount_view "$M"

# --- a view's reads leave the source's pages in its page cache: replies
# splice them without moving them (a move takes a page out of a FUSE
# source's cache, slowfs's here, s3fs's in use, and the next epoch reads
# it from the source again) ---
cached() { fincore -b -n -o RES "$S"/*.tar | awk '{s += $1} END {print s}'; }
mount_view "$S" "$M" "world=1,workers=1,shuffle=none,symlinks=0,prefetch=0" || bad "mount"
cat "$S"/*.tar > /dev/null
want=$(cached)
[ "$want" -ge "$(du -cb "$T"/tar/*.tar | tail -1 | cut -f1)" ] && ok || bad "the source is not all cached: $want bytes"
for f in $(reader_files "$M"); do cat "$f" > /dev/null; done
expect_eq "symlinks=0: the source's pages stay cached after the view is read" "$(cached)" "$want"
unmount_view "$M"

# --- an epoch switch while the old epoch's files are being read ahead ---
mount_view "$S" "$M" "world=2,workers=2,symlinks=0,prefetch_files=8" || bad "mount"
cat "$(reader_files "$M" | head -1)" > /dev/null
echo 1 > "$M/.shardfs/epoch"
out=$(python3 "$check" "$M" tar)
expect_eq "switched while prefetching: epoch 1 = plan, byte for byte" "$?" 0 || echo "$out" >&2
expect_eq "switched while prefetching: no errors" "$(counter "$M" prefetch_errors)" 0
unmount_view "$M"

# --- a source that stalls: 4 s a request.  The prefetch is logged as
# waiting, readers of other files are not held, and unmount returns at
# once: the daemon leaves the waiting reads to its exit.  (A fresh slowfs:
# nothing of it in the page cache) ---
slow_umount
slow_mount "$T/tar"
mount_view "$S" "$M" "world=1,workers=2,shuffle=none,symlinks=1,prefetch_threads=2" || bad "mount"
log=${daemon_log[$M]}
echo 4000 > "$LAT"
second=$(reader_files "$M" | sed -n 2p)
second=${second##*/}
second=${second#*-}
size=$(stat -c %s "$T/tar/$second")
readlink "$(reader_files "$M" | head -1)" > /dev/null
sleep 6.5
expect_eq "stalled: the waiting prefetch is logged" "$(grep -c "^shardfs: prefetch: reading $second (bytes 0..$size) has waited 5 s for the source: it is slow or stalled; readers do not wait for the prefetch, only for the source$" "$log")" 1
expect_eq "stalled: the daemon still answers" "$(cat "$M/.shardfs/epoch")" 0
t0=$(date +%s.%N)
unmount_view "$M"
t1=$(date +%s.%N)
awk -v a="$t0" -v b="$t1" 'BEGIN {exit !(b - a < 3)}' && ok ||
	bad "stalled: unmount took $(awk -v a="$t0" -v b="$t1" 'BEGIN {print b - a}') s, want under 3"
expect_eq "stalled: the exit says why it did not wait" "$(grep -c "^shardfs: exiting while prefetch reads still wait for the stalled source: they end with the process$" "$log")" 1
rm -f "$LAT"
slow_umount

# --- shards gone or replaced, before or after they were read ahead: the
# prefetch says so once, and a reader gets EIO as without prefetch (the
# file the prefetcher holds open is not served once its path names another
# or none); the other files are right.  (slowfs caching no attributes, so
# that a change shows at once) ---
cp -a "$T/tar" "$T/gone"
slow_mount "$T/gone" timeout=0
mount_view "$S" "$M" "world=1,workers=2,shuffle=none,symlinks=0" || bad "mount"
log=${daemon_log[$M]}
files=$(reader_files "$M")
nth() { local f; f=$(echo "$files" | sed -n "$1p"); f=${f##*/}; echo "${f#*-}"; }
rm "$T/gone/$(nth 2)"
cat "$(echo "$files" | head -1)" > /dev/null
expect_eq "gone: one prefetch error" "$(settled "$M" prefetch_errors)" 1
expect_eq "gone: the other four read ahead" "$(counter "$M" prefetch_files)" 4
expect_eq "gone: logged once" "$(grep -c "^shardfs: prefetch: $(nth 2): cannot open: No such file or directory; dropped it (readers read the source themselves and get its error, if any)$" "$log")" 1
expect_run "gone: the reader gets EIO" 1 "cat: $M/0/0/000001-$(nth 2): Input/output error" -- cat "$M/0/0/000001-$(nth 2)"
rm "$T/gone/$(nth 3)"
expect_run "read ahead, then deleted: EIO" 1 "cat: $M/0/0/000002-$(nth 3): Input/output error" -- cat "$M/0/0/000002-$(nth 3)"
expect_eq "read ahead, then deleted: logged" "$(grep -c "^shardfs: $(nth 3): cannot open: No such file or directory$" "$log")" 1
python3 - "$T/gone/$(nth 4)" <<'PY'
import os, sys
p = sys.argv[1]
data = bytearray(open(p, "rb").read())
data[600] ^= 1
open(p + ".new", "wb").write(data)
os.rename(p + ".new", p)
PY
size=$(stat -c %s "$T/gone/$(nth 4)")
expect_run "read ahead, then replaced: EIO" 1 "cat: $M/0/0/000003-$(nth 4): Input/output error" -- cat "$M/0/0/000003-$(nth 4)"
expect_eq "read ahead, then replaced: logged" "$(grep -c "^shardfs: $(nth 4) changed since it was indexed (size $size, the index says $size, and a new mtime)" "$log")" 1
expect_eq "the next file is right" "$(cmp "$M/0/0/000004-$(nth 5)" "$T/tar/$(nth 5)" && echo same)" same
unmount_view "$M"
slow_umount

# --- a local source reads ahead well on its own: only the first chunk of
# the next file is asked for (posix_fadvise, no copy) ---
mount_view "$T/tar" "$M" "world=1,workers=2,shuffle=none,symlinks=0" || bad "mount"
files=$(reader_files "$M")
cat "$(echo "$files" | head -1)" > /dev/null
expect_eq "local: the next file asked for" "$(settled "$M" prefetch_bytes)" "$(stat -c %s "$T/tar/$(nth 2)")"
expect_eq "local: no errors" "$(counter "$M" prefetch_errors)" 0
unmount_view "$M"

# --- a view slow to build says so, every 10 s, with the files described
# so far: Parquet slices are sized by cutting pages of the source, here a
# source that answers in 400 ms until the first note ---
shardfs-mkdata "$T/pq" --format parquet --shards 4 --samples 2000-3000 --seed 3 >/dev/null
shardfs-index "$T/pq" --out "$T/pq-index" --quiet
echo 400 > "$LAT"
slow_mount "$T/pq"
(
	for i in $(seq 300); do
		grep -qs "its view is still being built" "$T"/daemon-*.log && break
		sleep 0.1
	done
	rm -f "$LAT"
) &
watcher=$!
mount_view "$S" "$M" "index=$T/pq-index,world=2,workers=2,block=50" || bad "mount over a slow source"
wait "$watcher"
expect_eq "a slow build is noted once, with the files described" \
	"$(grep -cE '^shardfs: epoch 0: its view is still being built: [0-9]+ of 215 files described in 10 s \(a Parquet slice is sized by cutting its pages: larger blocks build faster\)$' "${daemon_log[$M]}")" 1
out=$(shardfs-check view "$M")
expect_eq "then served as planned" "$?:$(echo "$out" | tail -1)" "0:PASS: disjoint, nothing missing, equal counts, every sample's bytes and order as planned"
unmount_view "$M"
slow_umount

finish
