#!/usr/bin/env bash
# Faults and hostile input against a mounted view: shards truncated,
# replaced, deleted, swapped for a FIFO or moved behind a symlink while
# mounted; damaged indexes; a tiny RLIMIT_NOFILE; SIGTERM under load and
# SIGKILL; other users; and concurrent readers checking every byte while
# the epoch switches every 100 ms ($SHARDFS_STRESS_SECONDS, default 60).
# A fault must give EIO (or a refusal) and a log line that names it, never
# other bytes, and the other files must keep working.  (The prefetcher may
# log the same fault on its own line, "shardfs: prefetch: ...": the counts
# below are the readers' lines.)
. "$(dirname "$0")/../lib.sh"
PY=/usr/bin/python3
check="$TESTS/mount/check_view.py"
M=$T/mnt
O="world=2,workers=2,block=25,symlinks=0,shuffle=none"

shardfs-mkdata "$T/jsonl" --format jsonl --shards 12 --samples 20-200 --seed 4 >/dev/null
shardfs-index "$T/jsonl" --quiet

# lines_ok FILE SRC: every line of a view file is its source line
lines_ok() {
	$PY - "$1" "$2" "$TESTS/mount" <<'PY'
import json, sys
sys.path.insert(0, sys.argv[3])
from stress import source_lines
src = source_lines(sys.argv[2])
lines = open(sys.argv[1], "rb").read().splitlines(keepends=True)
print("ok" if lines and all(src.get(json.loads(l)["key"]) == l for l in lines) else "differs")
PY
}
# section NAME: report the checks since the last section (for
# tests/reliability.sh), then start NAME
sect_name= sect_p=0 sect_f=0
section() {
	[ -z "$sect_name" ] || printf 'section: %s: %d checks, %d failed\n' "$sect_name" \
		$((passed + failed - sect_p - sect_f)) $((failed - sect_f))
	sect_name=$1 sect_p=$passed sect_f=$failed
}
view_file() { ls -d "$M"/0/0/* "$M"/0/1/* "$M"/1/*/* | grep "shard-0000$1\." | head -1; }

# --- shards changed under a mounted view ---
cp -a "$T/jsonl" "$T/src"
mount_view "$T/src" "$M" "$O" || bad "mount"
log=${daemon_log[$M]}

# truncated under an open file: the pages already read stay right, the
# next read fails
section "shard truncated under an open file"
f=$(view_file 00)
size=$(stat -c %s "$T/src/shard-000000.jsonl")
expect_eq "truncated under an open file: EIO on the next read" "$($PY - "$f" "$T/src/shard-000000.jsonl" <<'PY'
import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)  # no read-ahead
first = os.pread(fd, 4096, 0)
os.truncate(sys.argv[2], 1000)
try:
    os.pread(fd, 4096, 4096)
    print("read")
except OSError as e:
    print(e.strerror)
PY
)" "Input/output error"
expect_eq "truncated: logged once" "$(grep -c "^shardfs: shard-000000.jsonl changed since it was indexed (size 1000, the index says $size, and a new mtime); its files fail with EIO until the index is rebuilt with shardfs-index" "$log")" 1

section "shard truncated while a small read is in flight"
# a reply of less than two pages libfuse would copy itself and send short
# when the source reads short; the daemon copies it and answers EIO.  The
# source behind slowfs, whose reads take 1 s while $T/lat exists: the
# shard, open in the daemon and its pages out of the cache, is truncated
# during the read, after the daemon's checks
cp -a "$T/jsonl" "$T/race"
mount_slowfs "$T/race" "$T/slow" "latency=0,latency_file=$T/lat"
mount_view "$T/slow" "$T/rm" "world=1,workers=1,symlinks=0,shuffle=none,prefetch=0" ||
	bad "mount over slowfs"
f=$(ls -d "$T/rm"/0/0/* | grep "shard-000002\." | head -1)
expect_eq "truncated in flight: a read under two pages answers EIO" "$($PY - "$f" "$T/race/shard-000002.jsonl" "$T/lat" <<'PY'
import os, sys, threading, time
fd = os.open(sys.argv[1], os.O_RDONLY)
os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)  # a page a read
os.pread(fd, 4096, 0)  # the daemon opens the shard
open("/proc/sys/vm/drop_caches", "w").write("1")  # the source's pages
open(sys.argv[3], "w").write("1000")
cut = threading.Thread(target=lambda: (time.sleep(0.4),
                                       os.truncate(sys.argv[2], 0)))
cut.start()
try:
    n = len(os.pread(fd, 4096, 4096))
    print("read %d bytes" % n)
except OSError as e:
    print(e.strerror)
cut.join()
os.unlink(sys.argv[3])
PY
)" "Input/output error"
unmount_view "$T/rm"
unmount_slowfs "$T/slow"

section "shard replaced by other bytes, same size"
f=$(view_file 01)
$PY - "$T/src/shard-000001.jsonl" <<'PY'
import sys
p = sys.argv[1]
data = bytearray(open(p, "rb").read())
i = data.index(b'"data": "') + 9
data[i] = ord("0") if data[i] != ord("0") else ord("1")
open(p + ".new", "wb").write(data)
PY
mv "$T/src/shard-000001.jsonl.new" "$T/src/shard-000001.jsonl"
size=$(stat -c %s "$T/src/shard-000001.jsonl")
expect_run "replaced: EIO" 1 "cat: $f: Input/output error" -- cat "$f"
expect_eq "replaced: logged" "$(grep -c "^shardfs: shard-000001.jsonl changed since it was indexed (size $size, the index says $size, and a new mtime)" "$log")" 1

section "shard deleted"
f=$(view_file 02)
rm "$T/src/shard-000002.jsonl"
expect_run "deleted: EIO" 1 "cat: $f: Input/output error" -- cat "$f"
expect_eq "deleted: logged" "$(grep -c "^shardfs: shard-000002.jsonl: cannot open: No such file or directory" "$log")" 1

section "shard swapped for a FIFO (no reader blocks)"
f=$(view_file 03)
rm "$T/src/shard-000003.jsonl" && mkfifo "$T/src/shard-000003.jsonl"
expect_run "FIFO: EIO, no hang" 1 "cat: $f: Input/output error" -- timeout 10 cat "$f"
expect_eq "FIFO: logged" "$(grep -c "^shardfs: shard-000003.jsonl: not a regular file" "$log")" 1

section "shard moved behind a symlink out of the source"
f=$(view_file 04)
mkdir "$T/outside" && mv "$T/src/shard-000004.jsonl" "$T/outside/"
ln -s "$T/outside/shard-000004.jsonl" "$T/src/shard-000004.jsonl"
expect_run "symlink: EIO" 1 "cat: $f: Input/output error" -- cat "$f"
expect_eq "symlink: logged" "$(grep -c "^shardfs: shard-000004.jsonl: cannot open: a symlink on its path (shardfs reads only files inside the source)" "$log")" 1

section "readers at once on the damaged shards: whole lines, each cause once"
# Four readers meet the five causes above at the same time, as do the
# prefetcher's threads: every line of the log is one line, whole, and each
# cause is logged once in all (not once per read, nor per file).
pids=()
for r in 1 2 3 4; do
	(for i in $(seq 20); do cat "$M"/*/*/* >/dev/null 2>&1; done) &
	pids+=($!)
done
wait "${pids[@]}"
expect_eq "at once: lines without the prefix, or with two" \
	"$(grep -vc '^shardfs: ' "$log"):$(grep -c 'shardfs: shardfs: ' "$log")" "0:0"
expect_eq "at once: each cause logged once" "$(for s in 0 1 2 3 4; do
	grep -c "^shardfs: shard-00000$s.jsonl[: ]" "$log"; done | tr '\n' ' ')" "1 1 1 1 1 "

section "the other shards keep their bytes"
for s in 05 06 07; do
	expect_eq "shard $s still right" "$(lines_ok "$(view_file $s)" "$T/jsonl")" ok
done
errors=$(counter "$M" errors)
[ "$errors" -ge 5 ] && ok || bad "status counts the errors: $errors, want at least 5"
unmount_view "$M"

# --- refused at mount: a source that is no longer what was indexed ---
section "mount refused: symlinked directory, FIFO shard"
refuse() {
	local name=$1 want=$2
	shift 2
	expect_run "$name" 1 "$want" -- shardfs "$@"
	mountpoint -q "$M" && { bad "$name: mounted anyway"; fusermount3 -u "$M"; } || ok
}
mkdir -p "$T/esc/sub" && cp -a "$T/jsonl/shard-000000.jsonl" "$T/esc/sub/a.jsonl"
shardfs-index "$T/esc" --quiet
mv "$T/esc/sub" "$T/esc-sub" && ln -s "$T/esc-sub" "$T/esc/sub"
refuse "a directory symlink out of the source" "shardfs: the index is stale: 1 shard file changed since it was built: sub/a.jsonl (a symlink on its path); rebuild it with: shardfs-index $T/esc" "$T/esc" "$M"
rm "$T/esc/sub" && mkdir "$T/esc/sub" && mkfifo "$T/esc/sub/a.jsonl"
refuse "a FIFO for a shard" "shardfs: the index is stale: 1 shard file changed since it was built: sub/a.jsonl (not a regular file); rebuild it with: shardfs-index $T/esc" "$T/esc" "$M"

# --- damaged indexes ---
section "index of another version, damaged table, garbage manifest"
for kind in version table manifest; do
	cp -a "$T/jsonl" "$T/idx-$kind"
	case $kind in
	version) sed -i 's/"shardfs_index": 1/"shardfs_index": 2/' "$T/idx-$kind/.shardfs/manifest.json"
		want="$T/idx-$kind/.shardfs/manifest.json: index version 2, this shardfs reads version 1; rebuild the index with this version's shardfs-index" ;;
	table) b=$(ls "$T/idx-$kind"/.shardfs/samples-*.bin)
		printf 'X' | dd of="$b" bs=1 seek=9 conv=notrunc 2>/dev/null
		want="$b: not a shardfs boundary table of version 1; the index is damaged: rebuild it with shardfs-index" ;;
	manifest) echo garbage > "$T/idx-$kind/.shardfs/manifest.json"
		want="$T/idx-$kind/.shardfs/manifest.json: not valid JSON at line 1, column 7 ('[' or '{' expected near 'garbage'); the index is damaged: rebuild it with shardfs-index" ;;
	esac
	refuse "index: $kind" "shardfs: $want" "$T/idx-$kind" "$M"
done

section "source or shard unreadable (root without CAP_DAC_OVERRIDE)"
# root reads everything; without the DAC capabilities it is held to the
# modes like anyone else
nodac() { setpriv --bounding-set -dac_override,-dac_read_search "$@"; }
cp -a "$T/jsonl" "$T/unread" && chmod 000 "$T/unread"
expect_run "unreadable source" 1 "shardfs: $T/unread/.shardfs/manifest.json: Permission denied: this user cannot read the index; give it read access to the source and its index (or run as their owner)" \
	-- nodac shardfs "$T/unread" "$M"
mountpoint -q "$M" && { bad "unreadable source: mounted anyway"; fusermount3 -u "$M"; } || ok
chmod 755 "$T/unread"
chmod 000 "$T/unread/shard-000002.jsonl" "$T/unread/shard-000004.jsonl"
expect_run "unreadable shards at mount" 1 "shardfs: $T/unread: this user (uid 0) cannot read 2 shard files: shard-000002.jsonl (Permission denied), shard-000004.jsonl (Permission denied); give it read access to them (or run as their owner)" \
	-- nodac shardfs "$T/unread" "$M"
mountpoint -q "$M" && { bad "unreadable shards: mounted anyway"; fusermount3 -u "$M"; } || ok
chmod 644 "$T/unread/shard-000002.jsonl" "$T/unread/shard-000004.jsonl"
DAEMON_WRAP=nodac mount_view "$T/unread" "$M" "$O" || bad "mount without DAC"
f=$(view_file 05)
chmod 000 "$T/unread/shard-000005.jsonl"
expect_run "unreadable shard: EIO" 1 "cat: $f: Input/output error" -- cat "$f"
expect_eq "unreadable shard: logged" "$(grep -c "^shardfs: shard-000005.jsonl: cannot open: Permission denied" "${daemon_log[$M]}")" 1
expect_eq "unreadable shard: the others still right" "$(lines_ok "$(view_file 06)" "$T/jsonl")" ok
unmount_view "$M"

section "RLIMIT_NOFILE=12"
# --- a tiny RLIMIT_NOFILE: files read one after another all work, and so
# do files held open past the limit: an open holds no descriptor of the
# daemon (the slices it keeps give theirs back when it runs out), with
# no_open or without.  (A read ahead of the reader may still fail while
# the prefetcher holds the last descriptors, and be logged: the kernel
# reads the page again when the reader asks for it.) ---
for no in 1 0; do
	DAEMON_WRAP="prlimit --nofile=12" mount_view "$T/jsonl" "$M" "$O,no_open=$no" || bad "mount nofile=12"
	out=$(python3 "$check" "$M" jsonl)
	expect_eq "nofile=12, no_open=$no: the whole view right, file after file" "$?" 0 || echo "$out" >&2
	expect_eq "nofile=12, no_open=$no: a file of every shard held open, each read right" "$($PY - "$M" "$T/jsonl" "$TESTS/mount" <<'PY'
import glob, json, os, re, sys
sys.path.insert(0, sys.argv[3])
from stress import source_lines
src = source_lines(sys.argv[2])
first = {}
for path in sorted(glob.glob(sys.argv[1] + "/*/*/*")):
    first.setdefault(re.sub(r"^\d+-|\.\d+-\d+\.jsonl$", "", os.path.basename(path)), path)
fds = [os.open(path, os.O_RDONLY) for path in first.values()]
right = 0
for fd in fds:
    lines = os.pread(fd, os.fstat(fd).st_size, 0).splitlines(keepends=True)
    right += bool(lines) and all(src.get(json.loads(l)["key"]) == l for l in lines)
print("%d held, %d right" % (len(fds), right))
PY
)" "12 held, 12 right"
	unmount_view "$M"
done

section "RLIMIT_NOFILE=40, 60 shards: no read waits"
# --- out of descriptors, the least recently used idle slices give theirs
# back before any wait, since they never would on their own: no read waits
# the 2 s a reader out of descriptors may wait for one that another read
# holds.  (Not at RLIMIT_NOFILE=12: libfuse's pipes, two descriptors per
# request thread, may take the last ones there, and nothing gives those
# back.) ---
shardfs-mkdata "$T/many" --shards 60 --samples 4 --seed 1 >/dev/null
shardfs-index "$T/many" --quiet || bad "index many"
for no in 1 0; do
	DAEMON_WRAP="prlimit --nofile=40" mount_view "$T/many" "$M" "world=1,workers=1,shuffle=none,symlinks=0,no_open=$no" ||
		bad "mount nofile=40"
	expect_eq "nofile=40, no_open=$no: 60 files of 60 shards read, none takes 0.5 s" "$($PY - "$M" <<'PY'
import glob, sys, time
paths = sorted(glob.glob(sys.argv[1] + "/0/0/*"))
slow = 0
for path in paths:
    t = time.monotonic()
    with open(path, "rb") as f:
        f.read()
    slow += time.monotonic() - t >= 0.5
print("%d read, %d slow" % (len(paths), slow))
PY
)" "60 read, 0 slow"
	unmount_view "$M"
done

# --- other users: reads with allow_other; the epoch is the owner's ---
section "other users, allow_other, the epoch control file"
chmod 711 "$T"
as_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
mount_view "$T/jsonl" "$M" "$O" || bad "mount"
expect_run "without allow_other another user cannot look" 2 "ls: cannot access '$M/0': Permission denied" -- as_nobody ls "$M/0"
unmount_view "$M"
mount_view "$T/jsonl" "$M" "$O,allow_other" || bad "mount allow_other"
f=$(ls -d "$M"/0/0/* | head -1)
expect_eq "allow_other: another user reads" "$(as_nobody cat "$f" | cmp - "$f" && echo same)" same
expect_run "allow_other: another user cannot switch the epoch" 2 "sh: 1: cannot create $M/.shardfs/epoch: Permission denied" -- as_nobody sh -c "echo 1 > $M/.shardfs/epoch"
expect_eq "allow_other: the epoch stayed" "$(cat "$M/.shardfs/epoch")" 0
expect_eq "allow_other: the owner switches it" "$(echo 1 > "$M/.shardfs/epoch" && cat "$M/.shardfs/epoch")" 1
unmount_view "$M"

# --- SIGTERM while 8 readers read as fast as they can ---
section "SIGTERM under 8 busy readers; relative mount point"
mount_view "$T/jsonl" "$M" "$O" || bad "mount for SIGTERM"
readers=()
for i in $(seq 8); do
	(while cat "$M"/$((i % 2))/$((i / 2 % 2))/* > /dev/null 2>&1; do :; done) &
	readers+=($!)
done
sleep 1
kill -TERM "${daemon_pid[$M]}"
wait "${daemon_pid[$M]}"
expect_eq "SIGTERM under load: exit 0" "$?" 0
mountpoint -q "$M" && bad "SIGTERM under load: still mounted" || ok
for i in $(seq 100); do
	alive=0
	for p in "${readers[@]}"; do kill -0 "$p" 2>/dev/null && alive=$((alive + 1)); done
	[ "$alive" -eq 0 ] && break
	sleep 0.1
done
expect_eq "SIGTERM under load: every reader came back" "$alive" 0
grep -qE "AddressSanitizer|LeakSanitizer|runtime error" "${daemon_log[$M]}" && bad "SIGTERM: sanitizer report" || ok

# a relative mount point: the daemon unmounts it all the same
mkdir -p "$T/rel"
(cd "$T" && exec shardfs jsonl rel -f -o world=1 2>rel.log) &
pid=$!
for i in $(seq 100); do timeout 10 mountpoint -q "$T/rel" && break; sleep 0.05; done
mounts+=("$T/rel")
kill -TERM "$pid"
wait "$pid"
expect_eq "relative mount point: SIGTERM exits 0" "$?" 0
mountpoint -q "$T/rel" && bad "relative mount point: still mounted" || ok

section "SIGKILL, ENOTCONN, fusermount3 -u, mount again"
# --- SIGKILL: the mount answers ENOTCONN until it is unmounted
# (docs/operations.md); then it mounts again as before ---
mount_view "$T/jsonl" "$M" "$O" || bad "mount for SIGKILL"
kill -KILL "${daemon_pid[$M]}"
wait "${daemon_pid[$M]}" 2>/dev/null
expect_run "SIGKILL: ENOTCONN" 1 "cat: $M/.shardfs/epoch: Transport endpoint is not connected" -- cat "$M/.shardfs/epoch"
expect_run "SIGKILL: fusermount3 -u recovers" 0 "" -- fusermount3 -u "$M"
mount_view "$T/jsonl" "$M" "$O" || bad "mount after SIGKILL"
out=$(python3 "$check" "$M" jsonl)
expect_eq "after SIGKILL: mounted again, view = plan" "$?" 0 || echo "$out" >&2
unmount_view "$M"

section "a test killed as ctest's timeout kills: its guard unmounts its view"
# the script and its daemon killed with SIGKILL at once (no trap runs);
# the guard of tests/guard.sh, outside their process group, unmounts what
# the script mounted beneath its scratch directory and removes that
cat > "$T/killed.sh" <<'EOF'
. "$1/lib.sh" "$2" "$1"
mount_view "$3/jsonl" "$T/m" world=1 || exit 1
echo "$T" > "$3/killed.T"
sleep 600
EOF
GUARD_LOG=$T/guard.log setsid bash "$T/killed.sh" "$TESTS" "$BUILD" "$T" &
killed=$!
for i in $(seq 200); do [ -s "$T/killed.T" ] && break; sleep 0.05; done
KT=$(cat "$T/killed.T")
mounts+=("$KT/m") # unmounted on exit should the guard fail
expect_eq "killed test: its view is mounted" "$(mountpoint -q "$KT/m" && echo mounted)" mounted
kill -KILL -- -"$killed"
wait "$killed" 2>/dev/null
for i in $(seq 100); do [ -e "$KT" ] || break; sleep 0.1; done
expect_eq "killed test: its view unmounted" "$(grep -c " $KT/m " /proc/mounts)" 0
expect_eq "killed test: its scratch removed" "$([ -e "$KT" ] && echo left)" ""
expect_eq "killed test: the guard says so" "$(sed 1d "$T/guard.log")" "$KT/m"
# the sweep unmounts what is beneath the directory, whatever its name
# (blanks, a backslash, a newline and a path after it), and nothing else:
# tmpfs mounts in a mount namespace of the test's own
cat > "$T/odd.sh" <<'EOF'
. "$1/guard.sh"
nl=$'\n'
mkdir -p "$2/victim"
for d in "$2/d/a b" "$2/d/c\\d" "$2/d/x${nl}$2/victim" "$2/d/end " "$2/victim"; do
	mkdir -p "$d" && mount -t tmpfs none "$d"
done
unmount_beneath "$2/d" >/dev/null
findmnt -rn -o TARGET | grep -F "$2"
EOF
expect_eq "the guard's sweep: odd names beneath, and only beneath" \
	"$(unshare -m --propagation private bash "$T/odd.sh" "$TESTS" "$T/odd")" "$T/odd/victim"

# --- 64 readers check every byte while the epoch switches every 100 ms ---
section "64 readers hashing while the epoch switches every 100 ms"
mount_view "$T/jsonl" "$M" "world=4,workers=2,block=25,symlinks=0" || bad "mount for stress"
out=$(timeout 600 $PY "$TESTS/mount/stress.py" "$M" "$T/jsonl" 64 "${SHARDFS_STRESS_SECONDS:-60}" 4)
expect_eq "stress: zero errors" "$?" 0
echo "stress: $out"
unmount_view "$M"
section ""
finish
