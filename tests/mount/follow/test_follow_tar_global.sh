#!/usr/bin/env bash
# follow=1 with tar chunks (docs/follow.md, the producer's contract): a
# chunk's global pax header ('g') would be the prefix of its slices and,
# concatenated with the other chunks' slices in a window or the stream,
# rename their members.  Such a chunk waits (a log line naming it, the byte
# and the fix) and holds back the chunks after it until it is replaced by
# one without; the windows read by Python's tarfile hold exactly the
# members written.  Mounts and unmounts (tests/lib.sh); as root.
. "$(dirname "$0")/../../lib.sh"

# chunk DIR NAME KEY N GLOBAL: a tar of N one-member samples KEY0.txt...,
# with a global pax header first (GLOBAL=first), between its members
# (GLOBAL=between) or none; written under a temporary name, then renamed
chunk() {
	python3 - "$@" <<'PY'
import io, os, sys, tarfile
d, name, key, n, where = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
buf = io.BytesIO()
t = tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT)
def member(t, i):
    ti = tarfile.TarInfo(f"{key}{i}.txt")
    data = f"{key}{i}\n".encode()
    ti.size = len(data)
    t.addfile(ti, io.BytesIO(data))
for i in range(n):
    member(t, i)
t.close()
raw = buf.getvalue()
g = io.BytesIO()
tarfile.open(fileobj=g, mode="w", format=tarfile.PAX_FORMAT,
             pax_headers={"path": "evil"}).close()
g = g.getvalue()[:1024]  # the 'g' header and its one block of records
assert g[156:157] == b"g"
if where == "first":
    raw = g + raw
elif where == "between":
    raw = raw[:1024] + g + raw[1024:]
with open(os.path.join(d, f".{name}.tmp"), "wb") as f:
    f.write(raw)
os.rename(os.path.join(d, f".{name}.tmp"), os.path.join(d, name))
PY
}

# members FILE: the member names tarfile reads, one line each
members() {
	timeout 30 python3 -c 'import sys, tarfile; print("\n".join(m.name for m in tarfile.open(sys.argv[1])))' "$1"
}


S=$T/src
M=$T/m
mkdir -p "$S"
chunk "$S" c0.tar a 3 none
mount_view "$S" "$M" "follow=1,follow_interval=1,follow_timeout=30,format=tar,window=6,world=1,workers=1" ||
	bad "mount"
chunk "$S" c1.tar b 3 first
chunk "$S" c2.tar c 3 none

wait_log "$M" 10 "c1.tar: waiting: c1.tar: a global pax header at byte 0 (1024 bytes before its first member): in a followed stream it would apply to the members of every chunk after it (renaming them); write chunks without one (Python's tarfile: no pax_headers=; GNU tar: --format=gnu or ustar) (tried again when it changes)" &&
	ok || bad "c1.tar with a global pax header first: the waiting line"
expect_eq "c1.tar waits: no window yet, c2.tar held back" \
	"$(timeout 10 ls "$M/0/0")" "stream.tar"

chunk "$S" c1.tar b 3 between
wait_log "$M" 10 "c1.tar: waiting: c1.tar: global pax header at byte 1024, after the first member: it would apply to the members after it wherever a slice puts them (renaming them); put global headers only at the start of the archive, or write none (tried again when it changes)" &&
	ok || bad "c1.tar with a global pax header between members: the waiting line"
expect_eq "c1.tar still waits" "$(timeout 10 ls "$M/0/0")" "stream.tar"

chunk "$S" c1.tar b 3 none
touch "$S/.shardfs-end"
for i in $(seq 100); do
	[ -e "$M/0/0/window-00000001.tar" ] && break
	sleep 0.1
done
expect_eq "window 0: exactly the 6 members of c0 and c1" \
	"$(members "$M/0/0/window-00000000.tar" | sort)" \
	"$(printf '%s\n' a0.txt a1.txt a2.txt b0.txt b1.txt b2.txt)"
expect_eq "window 1: exactly the 3 members of c2" \
	"$(members "$M/0/0/window-00000001.tar" | sort)" \
	"$(printf '%s\n' c0.txt c1.txt c2.txt)"
expect_eq "stream.tar: the 9 members, each once" \
	"$(members "$M/0/0/stream.tar" | sort | uniq -c | awk '{print $1, $2}')" \
	"$(printf '1 %s\n' a0.txt a1.txt a2.txt b0.txt b1.txt b2.txt c0.txt c1.txt c2.txt)"
unmount_view "$M"

expect_eq "nothing of this test left mounted" \
	"$(awk -v t="$T" 'index($2, t) == 1' /proc/mounts | wc -l)" 0
finish
