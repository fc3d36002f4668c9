#!/usr/bin/env bash
# Compressed tar shards (.tar.gz, .tgz, .tar.bz2, .tar.xz, .tar.zst),
# written by GNU tar and by Python's tarfile, with members larger and
# smaller than the archive: indexed with the sample counts an independent
# reader finds, the same per-sample digests as the archive uncompressed,
# served whole, read through the mount by GNU tar and Python's tarfile, and
# audited by shardfs-check.
. "$(dirname "$0")/lib.sh"
M=$T/m

# Samples of two members (k<i>.bin: 1 MiB of one byte, compresses to a
# few KB; k<i>.txt: 17 bytes); archive a holds samples 0-5, b..h two each.
mkdir -p "$T/members" "$T/src" "$T/plain"
python3 - "$T/members" <<'PY'
import os, sys
for i in range(20):
    open(os.path.join(sys.argv[1], "k%02d.bin" % i), "wb").write(bytes([i]) * (1 << 20))
    open(os.path.join(sys.argv[1], "k%02d.txt" % i), "wb").write(b"sample %02d text\n" % i)
PY
members() { for i in "$@"; do printf 'k%02d.bin\nk%02d.txt\n' "$i" "$i"; done; }
(cd "$T/members" &&
	tar -czf "$T/src/a.tar.gz" $(members 0 1 2 3 4 5) &&
	tar -czf "$T/src/b.tgz" $(members 6 7) &&
	tar -cjf "$T/src/c.tar.bz2" $(members 8 9) &&
	tar -cJf "$T/src/d.tar.xz" $(members 10 11) &&
	tar --zstd -cf "$T/src/e.tar.zst" $(members 12 13))
python3 - "$T/members" "$T/src" <<'PY'
import os, sys, tarfile
src, out = sys.argv[1], sys.argv[2]
for name, mode, ks in (("f.tar.gz", "w:gz", (14, 15)), ("g.tar.bz2", "w:bz2", (16, 17)),
                       ("h.tar.xz", "w:xz", (18, 19))):
    with tarfile.open(os.path.join(out, name), mode) as t:
        for k in ks:
            for ext in (".bin", ".txt"):
                t.add(os.path.join(src, "k%02d%s" % (k, ext)), arcname="k%02d%s" % (k, ext))
PY
# the same archives uncompressed, for the digests
for f in "$T"/src/*; do
	b=$(basename "$f"); b=${b%%.*}
	bsdtar -xOf "$f" > /dev/null || bad "bsdtar reads $f"
	(mkdir -p "$T/x/$b" && cd "$T/x/$b" && tar -xf "$f" && tar -cf "$T/plain/$b.tar" $(ls))
done
[ "$(stat -c %s "$T/src/b.tgz")" -lt 1048576 ] && ok || bad "a member must be larger than its archive"

shardfs-index "$T/src" --quiet || bad "index compressed shards"
shardfs-index "$T/plain" --quiet || bad "index the same shards uncompressed"
count() { python3 - "$1" <<'PY'
import json, sys
m = json.load(open(sys.argv[1] + "/.shardfs/manifest.json"))
print(" ".join("%s:%d:%s" % (s["path"].split(".")[0], s["samples"], s["format"]) for s in m["shards"]))
PY
}
# every member has its own key (k00.bin, k00.txt share the key k00)
expect_eq "sample counts of compressed shards" "$(count "$T/src")" \
	"a:6:tar b:2:tar c:2:tar d:2:tar e:2:tar f:2:tar g:2:tar h:2:tar"
expect_eq "the same counts uncompressed" "$(count "$T/plain")" "$(count "$T/src")"
# per-sample digests: those of the same archive uncompressed
expect_eq "per-sample digests as uncompressed" \
	"$(cat "$T"/src/.shardfs/digests-*.bin | sha256sum)" \
	"$(cat "$T"/plain/.shardfs/digests-*.bin | sha256sum)"

# served whole: world=2 splits 20 samples on shard boundaries (shuffle=none)
mount_view "$T/src" "$M" world=2,workers=1,shuffle=none || bad "mount compressed"
expect_eq "every file is a link to a whole shard" \
	"$(find "$M" -path "$M/.shardfs" -prune -o -type f -print | wc -l):$(find "$M" -type l | wc -l)" "0:8"
# GNU tar reads every file; Python's tarfile every one but .tar.zst (it
# reads zstd only from Python 3.14 on)
for r in 0 1; do
	n=0
	for f in "$M/$r/0"/*; do
		k=$(tar -tf "$f" | wc -l)
		n=$((n + k))
		[[ "$f" == *.zst ]] && continue
		py=$(python3 -c 'import sys, tarfile; print(len(tarfile.open(sys.argv[1]).getnames()))' "$f")
		expect_eq "tarfile reads $(basename "$f") as GNU tar does" "$py" "$k"
	done
	expect_eq "rank $r: 20 members" "$n" 20
done
out=$(shardfs-check view "$M")
expect_eq "the auditor passes the view" "$?:$(echo "$out" | tail -1)" \
	"0:PASS: disjoint, nothing missing, equal counts, every sample's bytes and order as planned"
unmount_view "$M"
expect_run "a cut of a compressed shard is refused" 2 \
	"shardfs-plan: a.tar.gz cannot be sliced (a tar shard of 6 samples that is compressed or opaque), but rank 0 worker 0 would read only samples 0..4 of it; use uncompressed shards, or choose world, workers, batch and start so that every reader's share ends on a shard boundary" \
	-- shardfs-plan "$T/src" -o world=4,shuffle=none

# a .tar that is gzip inside is found by its content: counted, served whole
mkdir -p "$T/disguised"
cp "$T/src/b.tgz" "$T/disguised/b.tar"
cp "$T/plain/c.tar" "$T/disguised/c.tar"
shardfs-index "$T/disguised" --quiet || bad "index a disguised .tar"
expect_eq "a gzip .tar is counted" "$(count "$T/disguised")" "b:2:tar c:2:tar"
mount_view "$T/disguised" "$M" world=2,shuffle=none || bad "mount disguised"
expect_eq "the gzip .tar is a link, the plain one too" "$(find "$M" -type l | wc -l)" 2
unmount_view "$M"

# a truncated compressed shard is refused, naming it
head -c 2000 "$T/src/a.tar.gz" > "$T/trunc.tar.gz"
mkdir -p "$T/bad" && mv "$T/trunc.tar.gz" "$T/bad/"
out=$(shardfs-index "$T/bad" 2>&1)
[[ $? -ne 0 && "$out" == *"trunc.tar.gz: "* ]] && ok || bad "truncated gzip shard not refused: $out"
finish
