#!/usr/bin/env bash
# Compressed tar shards (gzip, bzip2, xz, zstd; .tgz; written by GNU tar and
# by Python's tarfile; one member of 1 MiB of zeros, larger than the whole
# compressed shard, and small ones): indexed with the sample counts of the
# same archives uncompressed, served whole (symlinks), read back by GNU tar
# and Python's tarfile with exact per-reader counts, audited by shardfs-check.
. "$(dirname "$0")/../lib.sh"

for t in gzip bzip2 xz zstd; do
	command -v $t > /dev/null || { bad "$t is not installed: run bash tests/install-deps.sh"; }
done
[ "$failed" -eq 0 ] || finish

S=$T/src
W=$T/work
mkdir -p "$S" "$W"
# members of shard n: sample 0 holds 1 MiB of zeros, every sample two small
# members; 3 samples per shard
members() {
	rm -f "$W"/*
	head -c 1048576 /dev/zero > "$W/$1-0.bin"
	for i in 0 1 2; do
		printf 'shard %s sample %d' "$1" $i > "$W/$1-$i.txt"
		printf '{"shard":"%s","i":%d}' "$1" $i > "$W/$1-$i.json"
	done
}
names() { (cd "$W" && ls | sort); }

members a && (cd "$W" && tar -czf "$S/a.tar.gz" $(names))
members b && (cd "$W" && tar -cjf "$S/b.tar.bz2" $(names))
members c && (cd "$W" && tar -cJf "$S/c.tar.xz" $(names))
members d && (cd "$W" && tar --zstd -cf "$S/d.tar.zst" $(names))
members e && (cd "$W" && tar -czf "$S/e.tgz" $(names))
for m in gz bz2 xz; do
	members p$m
	python3 - "$W" "$S/p$m.tar.$m" "w:$m" <<'EOF'
import os, sys, tarfile
src, dst, mode = sys.argv[1:]
with tarfile.open(dst, mode) as t:
    for n in sorted(os.listdir(src)):
        t.add(os.path.join(src, n), arcname=n)
EOF
done
# the same archives uncompressed, indexed on their own for the digests
mkdir "$T/plain"
for f in "$S"/*; do
	b=$(basename "$f")
	case $b in
	*.tgz) zcat "$f" > "$T/plain/${b%.tgz}.tar" ;;
	*.zst) zstd -dcq "$f" > "$T/plain/${b%.zst}" ;;
	*.bz2) bzcat "$f" > "$T/plain/${b%.bz2}" ;;
	*.xz) xzcat "$f" > "$T/plain/${b%.xz}" ;;
	*.gz) zcat "$f" > "$T/plain/${b%.gz}" ;;
	esac
done
big=0
for f in "$S"/*; do [ "$(stat -c %s "$f")" -lt 1048576 ] && big=$((big + 1)); done
expect_eq "every shard is smaller than its 1 MiB member" "$big" 8

out=$(shardfs-index "$S" 2>&1)
expect_eq "index: exit 0" "$?" 0
[[ "$out" == "indexed 8 shards (8 scanned, 0 reused, 0 skipped), 24 samples, "* ]] && ok || bad "index: $out"
shardfs-index "$T/plain" --quiet || bad "index plain"
counts() {
	python3 -c '
import json, sys
m = json.load(open(sys.argv[1] + "/.shardfs/manifest.json"))
for s in m["shards"]:
    print(s["path"].split(".")[0], s["samples"])' "$1"
}
expect_eq "compressed: the counts of the same archives uncompressed" \
	"$(counts "$S" | tr '\n' ' ')" "$(counts "$T/plain" | tr '\n' ' ')"
expect_eq "counts" "$(counts "$S" | awk '{ print $2 }' | sort -u)" 3
digests() { echo "$1/.shardfs/$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["digests"]["file"])' "$1/.shardfs/manifest.json")"; }
cmp -s "$(digests "$S")" "$(digests "$T/plain")" && ok || bad "per-sample digests differ from the uncompressed archives'"

# a cut compressed shard: the member, the decompressed offset, the fix
mkdir "$T/cut" && head -c 1000 "$S/a.tar.gz" > "$T/cut/a.tar.gz"
out=$(shardfs-index "$T/cut" 2>&1)
expect_eq "cut .tar.gz: exit 2" "$?" 2
[[ "$out" =~ ^'shardfs-index: 1 shard could not be indexed: a.tar.gz: tar member "a-0.bin" cannot be read at byte '[0-9]+' of the decompressed stream: truncated gzip input; fix or remove it, or run shardfs-index --skip-bad to index the rest'$ ]] &&
	ok || bad "cut .tar.gz: $out"
# gzip content under a plain .tar name: found by content, counted
mkdir "$T/named" && cp "$S/a.tar.gz" "$T/named/a.tar"
shardfs-index "$T/named" --quiet || bad "index gzip named .tar"
expect_eq "gzip named .tar: counted" "$(counts "$T/named")" "a 3"

# --- mounted: every reader reads 2 whole shards of 3 samples ---
M=$T/m
mount_view "$S" "$M" world=2,workers=2 || bad "mount"
readers=$(cd "$M" && ls -d [0-9]*/[0-9]* | tr '\n' ' ')
expect_eq "readers" "$readers" "0/0 0/1 1/0 1/1 "
links=$(find "$M"/[0-9]* -type l | wc -l)
files=$(find "$M"/[0-9]* -type f | wc -l)
expect_eq "whole shards as symlinks, no slices" "$links:$files" "8:0"
gnu_count() { # samples in the archives of a reader, by key, read by GNU tar
	local f
	for f in "$1"/*; do tar -tf "$f"; done | sed 's/\..*//' | uniq | wc -l
}
py_count() { # the same with Python's tarfile, reading every member's data
	python3 -c '
import io, os, subprocess, sys, tarfile
n, d = 0, sys.argv[1]
for f in sorted(os.listdir(d)):
    last = None
    p = os.path.join(d, f)
    # this tarfile reads no zstd (Python 3.14 does): zstd decompresses
    # (from stdin: zstd skips symlinks given by name)
    z = subprocess.run(["zstd", "-dcq"], stdin=open(p, "rb"),
                       stdout=subprocess.PIPE, check=True).stdout \
        if p.endswith(".zst") else None
    with (tarfile.open(fileobj=io.BytesIO(z), mode="r:") if z else
          tarfile.open(p, "r:*")) as t:
        for m in t:
            t.extractfile(m).read()
            k = m.name.split(".")[0]
            if k != last:
                n, last = n + 1, k
print(n)' "$1"
}
for r in 0/0 0/1 1/0 1/1; do
	expect_eq "reader $r: GNU tar counts" "$(gnu_count "$M/$r")" 6
	expect_eq "reader $r: tarfile counts" "$(py_count "$M/$r")" 6
done
out=$(shardfs-check view "$M")
expect_eq "shardfs-check view passes" "$?:$(echo "$out" | tail -1)" \
	"0:PASS: disjoint, nothing missing, equal counts, every sample's bytes and order as planned"
unmount_view "$M"

# with symlinks=0 the daemon serves the compressed bytes unchanged
mount_view "$S" "$M" world=2,workers=2,symlinks=0 || bad "mount symlinks=0"
same=0
for f in "$M"/[0-9]*/[0-9]*/*; do
	b=$(basename "$f")
	cmp -s "$f" "$S/${b#*-}" && same=$((same + 1))
done
expect_eq "symlinks=0: 8 files equal to their shards" "$same" 8
expect_eq "symlinks=0: GNU tar counts reader 1/1" "$(gnu_count "$M/1/1")" 6
unmount_view "$M"

# --- a share that would cut a compressed shard is refused ---
expect_run "a cut compressed shard is refused" 1 \
	"shardfs: a.tar.gz cannot be sliced (a tar shard of 3 samples that is compressed or opaque), but rank 0 worker 0 would read only samples 0..1 of it; use uncompressed shards, or choose world, workers, batch and start so that every reader's share ends on a shard boundary" \
	-- shardfs "$S" "$T/refused" -f -o world=3,workers=4,shuffle=none

finish
