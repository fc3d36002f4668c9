#!/usr/bin/env bash
# What a user who names the source, the index or the epochs must not be
# able to do to a mount (docs/security.md): a comma in a path adds no FUSE
# option, an index= that is not there is refused, old epochs held open are
# bounded, and a reader cannot make the control files cost the daemon a
# rebuild per stat.
. "$(dirname "$0")/../lib.sh"
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

# --- old epochs held open: at most FS_OLD_VIEWS (4) old views kept ---
# a file (symlinks=0: served by the daemon) and a directory held open in
# each of 6 epochs, then a switch: the 2 oldest are let go
mount_view "$T/tar" "$M" world=2,symlinks=0 || bad "mount for old epochs"
mount_view "$T/tar" "$T/m5" world=2,symlinks=0,epoch=5 || bad "mount of epoch 5"
out=$(python3 - "$M" "$T/m5" <<'PY'
import errno, json, os, sys
mnt, m5 = sys.argv[1:3]
held = []
for e in range(6):
    with open(mnt + "/.shardfs/epoch", "w") as f:
        f.write("%d\n" % e)
    d = mnt + "/0/0"
    name = sorted(os.listdir(d))[0]
    fd = os.open(os.path.join(d, name), os.O_RDONLY)
    # its pages cached (they must go too); the newest compared with
    # another mount of its epoch, the others with what they read now
    first = os.pread(fd, 1 << 20, 0)
    if e == 5:
        with open(os.path.join(m5, "0/0", name), "rb") as f:
            first = f.read()
    held.append((e, name, fd, os.open(d, os.O_RDONLY | os.O_DIRECTORY), first))
with open(mnt + "/.shardfs/epoch", "w") as f:
    f.write("6\n")
for e, name, fd, dfd, want in held:
    try:
        data = os.pread(fd, 1 << 20, 0)
        print(e, "reads", "the bytes of its epoch" if data == want else "OTHER BYTES")
    except OSError as x:
        print(e, "reads", errno.errorcode[x.errno])
    try:
        print(e, "lists", "its file" if name in os.listdir(dfd) else "OTHER FILES")
    except OSError as x:
        print(e, "lists", errno.errorcode[x.errno])
print("views", json.load(open(mnt + "/.shardfs/status"))["counters"]["views"])
PY
)
expect_eq "old epochs past the bound: EIO, the others read" "$out" "0 reads EIO
0 lists EIO
1 reads EIO
1 lists EIO
2 reads the bytes of its epoch
2 lists its file
3 reads the bytes of its epoch
3 lists its file
4 reads the bytes of its epoch
4 lists its file
5 reads the bytes of its epoch
5 lists its file
views 5"
expect_eq "old epochs past the bound: one line each" \
	"$(grep -c 'let go of its view' "${daemon_log[$M]}"):$(grep -c '^shardfs: epoch 0: let go of its view: more than 4 older epochs were held open (a file or directory in each); its files still open now fail with EIO$' "${daemon_log[$M]}")" "2:1"
unmount_view "$T/m5"
unmount_view "$M"

# --- control files cost a reader no rebuild: built once per view, and
# plan.json's first build does not hold up reads.  Compared with the
# daemon's own time for a build, so that the machine's speed cancels out ---
shardfs-mkdata "$T/big" --format tfrecord --shards 400 --samples 200 --size 10-20 --seed 52 >/dev/null
shardfs-index "$T/big" --quiet
mount_view "$T/big" "$M" world=1024,workers=16,epochs=4,symlinks=0 || bad "mount at world=1024"
out=$(python3 - "$M" <<'PY'
import os, sys, threading, time
mnt = sys.argv[1]
status = mnt + "/.shardfs/status"
t = time.monotonic()
os.stat(status)  # builds the status of this view
first = time.monotonic() - t
t = time.monotonic()
for _ in range(50):
    os.stat(status)
rest = time.monotonic() - t
print("50 stats of status", "cost less than 10 first ones" if rest < 10 * first
      else "cost %.0f ms, the first %.0f ms" % (1000 * rest, 1000 * first))
files = [os.path.join(mnt, str(r), "0", f) for r in range(64)
         for f in sorted(os.listdir(os.path.join(mnt, str(r), "0")))]
built = []
def build():
    t = time.monotonic()
    os.stat(mnt + "/.shardfs/plan.json")
    built.append(time.monotonic() - t)
th = threading.Thread(target=build)
th.start()
waits = []
for f in files:
    if built:
        break
    t = time.monotonic()
    with open(f, "rb") as r:
        r.read()
    waits.append(time.monotonic() - t)
th.join()
print("reads during plan.json's first build", "wait less than half of it"
      if max(waits, default=0) < built[0] / 2 else "waited %.0f ms of its %.0f ms" %
      (1000 * max(waits, default=0), 1000 * built[0]))
PY
)
expect_eq "control files built once per view" "$out" "50 stats of status cost less than 10 first ones
reads during plan.json's first build wait less than half of it"
unmount_view "$M"

# Lookups of a missing name in views as they are let go, 300 switches with
# a directory held open in each: a failed lookup once read its view after
# giving its reference back, and a view let go is freed with its last one
# (the daemon died of it within ~270 switches)
O="world=1,workers=1,shuffle=none,symlinks=0,prefetch=0,ahead=0"
mount_view "$T/tar" "$M" "$O" || bad "mount for the lookup race"
out=$(timeout 120 python3 - "$M" <<'PY'
import os, sys, threading, time
mnt = sys.argv[1]
stop, target, errors = threading.Event(), [None], []
def lookups():
    while not stop.is_set():
        fd = target[0]
        if fd is None:
            continue
        try:
            os.stat("no-such-name", dir_fd=fd)
        except FileNotFoundError:
            pass
        except OSError as e:
            if e.errno != 5:  # EIO: a view let go
                errors.append(e.errno)
                stop.set()
threads = [threading.Thread(target=lookups) for _ in range(3)]
for t in threads:
    t.start()
fds = {}
for e in range(300):
    if stop.is_set():
        break
    with open(mnt + "/.shardfs/epoch", "w") as f:
        f.write("%d\n" % e)
    fds[e] = os.open(mnt + "/0/0", os.O_RDONLY | os.O_DIRECTORY)
    target[0] = fds.get(e - 4)  # the view the next switch lets go
    time.sleep(0.005)
stop.set()
for t in threads:
    t.join()
print("lookups answered", "ENOENT or EIO" if not errors else errors[:3])
PY
)
expect_eq "lookups in views being let go" "$out" "lookups answered ENOENT or EIO"
expect_eq "the daemon lives on" "$(cat "$M/.shardfs/epoch" 2>&1)" "299"
unmount_view "$M"

finish
