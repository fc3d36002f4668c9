#!/usr/bin/env bash
# shardfs-mkdata, shardfs-index and slices, read by real tools: GNU tar,
# bsdtar, Python's tarfile and readers written here.
. "$(dirname "$0")/../lib.sh"

digest_tree() { (cd "$1" && find . -path ./.shardfs -prune -o -type f -print | sort | xargs sha256sum); }
samples_in_index() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["samples"])' "$1/.shardfs/manifest.json"; }

# --- mkdata is deterministic ---
for f in tar jsonl tfrecord files; do
	shardfs-mkdata "$T/a-$f" --format "$f" --shards 3 --samples 5-9 --seed 3
	shardfs-mkdata "$T/b-$f" --format "$f" --shards 3 --samples 5-9 --seed 3
	shardfs-mkdata "$T/c-$f" --format "$f" --shards 3 --samples 5-9 --seed 4
	expect_eq "mkdata $f same seed" "$(digest_tree "$T/a-$f")" "$(digest_tree "$T/b-$f")"
	[ "$(digest_tree "$T/a-$f")" != "$(digest_tree "$T/c-$f")" ] && ok || bad "mkdata $f other seed"
done

# --- the index counts what independent readers count ---
cat > "$T/count.py" <<'PY'
import os, struct, sys, tarfile
fmt, root = sys.argv[1], sys.argv[2]
def key(name):
    d, _, b = name.rpartition("/")
    return (d + "/" if d else "") + b.split(".", 1)[0]
n = 0
for dirpath, dirs, files in os.walk(root):
    dirs[:] = sorted(d for d in dirs if not d.startswith("."))
    for f in sorted(files):
        p = os.path.join(dirpath, f)
        if fmt == "tar":
            last = None
            for m in tarfile.open(p):
                if m.isfile() and key(m.name) != last:
                    n += 1
                    last = key(m.name)
        elif fmt == "jsonl":
            n += open(p, "rb").read().count(b"\n")
        elif fmt == "tfrecord":
            data, off = open(p, "rb").read(), 0
            while off < len(data):
                off += 16 + struct.unpack_from("<Q", data, off)[0]
                n += 1
if fmt == "files":
    keys = set()
    for dirpath, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        for f in files:
            keys.add(os.path.join(dirpath, f.split(".", 1)[0]))
    n = len(keys)
print(n)
PY
for f in tar jsonl tfrecord files; do
	fmtopt=""; [ "$f" = files ] && fmtopt="--format files"
	shardfs-index "$T/a-$f" $fmtopt --quiet
	expect_eq "index $f samples" "$(samples_in_index "$T/a-$f")" "$(python3 "$T/count.py" "$f" "$T/a-$f")"
done

# --- a re-run reuses every unchanged shard ---
out=$(shardfs-index "$T/a-tar")
expect_eq "re-run reuses" "${out%% samples*}" "indexed 3 shards (0 scanned, 3 reused, 0 skipped), $(samples_in_index "$T/a-tar")"

# --- tar slices read by GNU tar, bsdtar and tarfile without a warning ---
cat > "$T/members.py" <<'PY'
import sys, tarfile
# members of the samples listed in argv[2] ("3,4,0") of tar argv[1], in
# that order, as "name sha256" lines; and the same for the slice argv[3]
import hashlib
def key(n):
    d, _, b = n.rpartition("/")
    return (d + "/" if d else "") + b.split(".", 1)[0]
def samples(path):
    out, last = [], None
    with tarfile.open(path) as t:
        for m in t:
            if key(m.name) != last:
                out.append([])
                last = key(m.name)
            out[-1].append("%s %s" % (m.name, hashlib.sha256(t.extractfile(m).read()).hexdigest()))
    return out
src = samples(sys.argv[1])
want = [line for i in sys.argv[2].split(",") for line in src[int(i)]]
got = [line for s in samples(sys.argv[3]) for line in s]
print("same" if got == want else "differ:\n%s\n%s" % (got, want))
PY
shardfs-mkdata "$T/long" --format tar --shards 2 --samples 6 --long-names --size 0-1500
python3 - "$T/long/global.tar" <<'PY'
import io, sys, tarfile
with tarfile.open(sys.argv[1], "w", format=tarfile.PAX_FORMAT,
                  pax_headers={"comment": "a global header"}) as t:
    for i in range(5):
        for ext, size in ((".jpg", 512), (".cls", 0), (".json", 700)):
            info = tarfile.TarInfo("g%03d%s" % (i, ext))
            info.size = size
            t.addfile(info, io.BytesIO(bytes([i]) * size))
PY
shardfs-index "$T/long" --quiet
for shard in shard-000000.tar global.tar; do
	slice-dump "$T/long" "$shard" 3:2,0:1 "$T/slice.tar"
	expect_run "GNU tar -tf $shard slice" 0 "" -- tar -tf "$T/slice.tar"
	expect_run "bsdtar -tf $shard slice" 0 "" -- bsdtar -tf "$T/slice.tar"
	expect_eq "tarfile reads $shard slice" "$(python3 "$T/members.py" "$T/long/$shard" 3,4,0 "$T/slice.tar")" "same"
	rm -rf "$T/x" && mkdir "$T/x"
	expect_run "GNU tar -xf $shard slice" 0 "" -- tar -xf "$T/slice.tar" -C "$T/x"
done
expect_eq "global header kept" "$(python3 -c 'import sys,tarfile; print(tarfile.open(sys.argv[1]).pax_headers.get("comment"))' "$T/slice.tar")" "a global header"

# --- jsonl and tfrecord slices: the chosen samples, whole ---
slice-dump "$T/a-jsonl" shard-000001.jsonl 3:2,0:1 "$T/slice.jsonl"
expect_eq "jsonl slice" "$(cat "$T/slice.jsonl")" "$(for i in 4 5 1; do sed -n "${i}p" "$T/a-jsonl/shard-000001.jsonl"; done)"
cat > "$T/records.py" <<'PY'
import struct, sys
def records(p):
    data, off, out = open(p, "rb").read(), 0, []
    while off < len(data):
        n = struct.unpack_from("<Q", data, off)[0]
        out.append(data[off + 12:off + 12 + n])
        off += 16 + n
    return out
src, got = records(sys.argv[1]), records(sys.argv[2])
print("same" if got == [src[3], src[4], src[0]] else "differ")
PY
slice-dump "$T/a-tfrecord" shard-000002.tfrecord 3:2,0:1 "$T/slice.tfrecord"
expect_eq "tfrecord slice" "$(python3 "$T/records.py" "$T/a-tfrecord/shard-000002.tfrecord" "$T/slice.tfrecord")" "same"

# --- bad shards: refused with the file and offset, or skipped ---
cp -r "$T/a-tar" "$T/bad"
echo "this is not a tar archive, only text long enough to be looked at" > "$T/bad/broken.tar"
head -c 3000 "$T/a-tar/shard-000001.tar" > "$T/bad/cut.tar"
before=$(ls -A "$T/bad/.shardfs")
expect_run "bad shard refused" 2 \
	"shardfs-index: 2 shards could not be indexed: broken.tar: not a tar archive at byte 0 (Unrecognized archive format); cut.tar: truncated tar member \"000001_000000.cls\" at byte 1536: its data needs 789 bytes up to byte 3072, the file has 3000; fix or remove them, or run shardfs-index --skip-bad to index the rest" \
	-- shardfs-index "$T/bad" --quiet
expect_eq "a failed run leaves no temporary file in the index directory" \
	"$(ls -A "$T/bad/.shardfs")" "$before"
expect_run "skip-bad lists" 0 \
	"shardfs-index: skipped: broken.tar: not a tar archive at byte 0 (Unrecognized archive format)
shardfs-index: skipped: cut.tar: truncated tar member \"000001_000000.cls\" at byte 1536: its data needs 789 bytes up to byte 3072, the file has 3000" \
	-- shardfs-index "$T/bad" --quiet --skip-bad
expect_eq "skip-bad indexes the rest" "$(samples_in_index "$T/bad")" "$(samples_in_index "$T/a-tar")"

# --- verify: clean, then one byte changed behind the index's back ---
out=$(shardfs-index "$T/a-tfrecord" --verify)
expect_eq "verify clean" "$?:$out" "0:verified 3 shards, $(samples_in_index "$T/a-tfrecord") samples: 0 mismatches"
f="$T/a-tfrecord/shard-000001.tfrecord"
cp -p "$f" "$T/keep"
printf 'Z' | dd of="$f" bs=1 seek=20 conv=notrunc status=none
touch -r "$T/keep" "$f"
expect_run "verify finds the byte" 1 \
	"shardfs-index: mismatch: shard-000001.tfrecord: bad TFRecord data CRC in record 0 at byte 0" \
	-- shardfs-index "$T/a-tfrecord" --verify --quiet

# --- a damaged block of the boundary table: a mount would read it only
# where a view needs it; --verify, shardfs-check and a refresh check the
# whole table against its blocks file first ---
shardfs-mkdata "$T/blk" --format jsonl --shards 2 --samples 800 --seed 5 >/dev/null
shardfs-index "$T/blk" --quiet
tbl=$(ls "$T/blk/.shardfs"/samples-*.bin)
blk=$(basename "$(ls "$T/blk/.shardfs"/blocks-*.bin)")
expect_eq "the blocks file: 1602 boundaries in 4 blocks of 4096 bytes" \
	"$(python3 -c 'import json,sys; b=json.load(open(sys.argv[1]))["boundaries"]; print(b["count"], b["blocks"]["count"], b["blocks"]["block_bytes"], b["blocks"]["file"])' "$T/blk/.shardfs/manifest.json")" \
	"1602 4 4096 $blk"
printf 'Z' | dd of="$tbl" bs=1 seek=$((64 + 4096 + 9)) conv=notrunc status=none
want="$tbl: block 1 (bytes 4160 to 8255) does not match its checksum in $blk; the index is damaged: rebuild it with shardfs-index"
expect_run "verify: a damaged block" 2 "shardfs-index: $want" \
	-- shardfs-index "$T/blk" --verify --quiet
expect_run "shardfs-check plan: a damaged block" 2 "shardfs-check: $want" \
	-- shardfs-check plan "$T/blk" -o world=2
expect_run "a refresh does not reuse a damaged table" 0 \
	"shardfs-index: not reusing the old index: $want" \
	-- shardfs-index "$T/blk"
expect_eq "rebuilt: verify clean" "$(shardfs-index "$T/blk" --verify)" \
	"verified 2 shards, 1600 samples: 0 mismatches"
expect_eq "rebuilt: one file of each kind" \
	"$(ls "$T/blk/.shardfs" | sed 's/-[0-9a-f]*\.bin$//')" "blocks
digests
manifest.json
samples"

# --- --out leaves the source alone ---
shardfs-mkdata "$T/ro" --format jsonl --shards 2 --samples 3
shardfs-index "$T/ro" --out "$T/ro-index" --quiet
expect_eq "--out writes elsewhere" "$(ls -A "$T/ro")" "shard-000000.jsonl
shard-000001.jsonl"
expect_eq "--out index usable" "$(shardfs-plan "$T/ro" --index "$T/ro-index" | head -1)" \
	"plan: 6 samples in 2 shards, 2 units (shuffle=units, seed=0, epoch=0, block=0)"

# --- a progress line on a terminal, nothing when there is none ---
rm -rf "$T/a-jsonl/.shardfs"
out=$(script -qec "shardfs-index '$T/a-jsonl'" /dev/null | tr '\r' '\n' | grep '^shardfs-index: ' | tail -1)
[[ "$out" =~ ^shardfs-index:\ 3/3\ shards,\ [0-9.]+\ KiB/[0-9.]+\ KiB,\ [0-9]+\ samples/s,\ ETA\ 0s ]] && ok || bad "no progress line on a terminal: '$out'"
rm -rf "$T/a-jsonl/.shardfs"
expect_eq "no progress line without a terminal" "$(shardfs-index "$T/a-jsonl" 2>&1 >/dev/null)" ""

# --- usage errors ---
expect_run "unknown format" 2 \
	"shardfs-index: --format zip is not a format of files: use tar, jsonl, tfrecord, files, parquet or opaque; a Lance dataset needs no --format" \
	-- shardfs-index "$T/ro" --format zip
expect_run "a format of directories" 2 \
	"shardfs-index: --format lance is not a format of files: use tar, jsonl, tfrecord, files, parquet or opaque; a Lance dataset needs no --format" \
	-- shardfs-index "$T/ro" --format lance
# the formats and their file name endings in --help come from the drivers
expect_eq "--help names the formats of files" \
	"$(shardfs-index --help | sed -n '/--format F/,/)$/p' | tr -s ' \n' ' ')" \
	" --format F treat every file as format F: tar, jsonl, tfrecord, files, parquet, opaque (default: by extension: .tar .tar.gz .tgz .tar.zst .tar.xz .tar.bz2 .jsonl .ndjson .tfrecord .tfrecords .parquet .arrow .npy .npz) "
expect_run "bad jobs" 2 "shardfs-index: jobs=0 is out of range: use an integer in 1..256" \
	-- shardfs-index "$T/ro" --jobs 0
expect_run "no source" 2 "shardfs-index: $T/none: cannot open the source directory: No such file or directory" \
	-- shardfs-index "$T/none" --quiet

# --- --jobs N bounds the threads: a Parquet shard of 65 536 rows or more
# is hashed on the threads no other shard keeps busy; --jobs 1 is one
# thread (the pool's worker: one clone), --jobs 4 on one shard the worker
# and 3 helpers; the index is the same whatever the threads
venv=$(bash "$TESTS/python/venv.sh" "$TESTS/python/requirements.txt") ||
	bad "build the pyarrow venv"
mkdir "$T/big"
parquet_70000 "$venv/bin/python" "$T/big/rows.parquet" ||
	bad "write a Parquet file of 70000 rows"
traced "$T/strace-1" shardfs-index "$T/big" --jobs 1 --quiet --out "$T/big-1" ||
	bad "index with --jobs 1"
expect_eq "--jobs 1: one thread reads and hashes" "$(threads_in "$T/strace-1")" 1
traced "$T/strace-4" shardfs-index "$T/big" --jobs 4 --quiet --out "$T/big-4" ||
	bad "index with --jobs 4"
expect_eq "--jobs 4, one shard: a worker and 3 hashing helpers" \
	"$(threads_in "$T/strace-4")" 4
shardfs-index "$T/big" --quiet --out "$T/big-d" || bad "index with the default jobs"
expect_eq "the same index with --jobs 1, 4 and the default" \
	"$(diff -r "$T/big-1" "$T/big-d" && diff -r "$T/big-4" "$T/big-d" && echo same)" same
expect_eq "the index has the rows' digests" \
	"$(ls "$T/big-1" | sed -E 's/-[0-9a-f]{16}\.bin$/-X.bin/' | sort | tr '\n' ' ')" \
	"blocks-X.bin digests-X.bin manifest.json samples-X.bin "

# a shard too small for helpers never holds them: with --jobs 4 on two
# shards, the two workers leave two spare threads, and a shard of 60 000
# rows (hashed on its worker alone, a while: its rows are 500 bytes) no
# longer keeps one of them from the shard of 70 000 rows hashed beside it,
# which takes both when its footer says it has the rows to use them (a
# worker each and 2 helpers: 4 clones; a reservation made before the
# scan knew its rows left one helper: 3)
mkdir "$T/two"
"$venv/bin/python" -c 'import sys, pyarrow as pa, pyarrow.parquet as pq
n = 60000
pq.write_table(pa.table({"s": pa.array([f"{i:0500d}" for i in range(n)])}),
               sys.argv[1], row_group_size=30000)' "$T/two/a-60000.parquet" ||
	bad "write a Parquet file of 60000 rows"
cp "$T/big/rows.parquet" "$T/two/b-70000.parquet"
traced "$T/strace-two" shardfs-index "$T/two" --jobs 4 --quiet --out "$T/two-4" ||
	bad "index two shards with --jobs 4"
expect_eq "--jobs 4, two shards: the spare threads help the big one alone" \
	"$(threads_in "$T/strace-two")" 4
shardfs-index "$T/two" --jobs 1 --quiet --out "$T/two-1" ||
	bad "index two shards with --jobs 1"
expect_eq "the same index of two shards with --jobs 1 and 4" \
	"$(diff -r "$T/two-1" "$T/two-4" && echo same)" same

# --- the check of the source against the index waits on the source's
# stats, not on a CPU: 16 threads by default even on one CPU (one per CPU
# before: a 1-CPU container checked an s3fs bucket on one thread); --jobs
# still bounds it
shardfs-mkdata "$T/forty" --format jsonl --shards 40 --samples 2 --seed 1
shardfs-index "$T/forty" --quiet
traced "$T/strace-c" taskset -c 0 shardfs-check plan "$T/forty" -o world=2 >/dev/null ||
	bad "shardfs-check plan on one CPU"
expect_eq "shardfs-check plan on one CPU: the shards checked on 16 threads" \
	"$(threads_in "$T/strace-c")" 16
traced "$T/strace-c3" taskset -c 0 shardfs-check plan "$T/forty" -o world=2 --jobs 3 >/dev/null ||
	bad "shardfs-check plan --jobs 3"
expect_eq "shardfs-check plan --jobs 3: 3 threads" "$(threads_in "$T/strace-c3")" 3

# --- indexing in parts (an Indexed Job), merged: what one run writes ---
for f in tar files; do
	shardfs-mkdata "$T/p-$f" --format $f --shards 11 --samples 1-30 --seed 31 > /dev/null
	fmt=(); [ $f = files ] && fmt=(--format files)
	shardfs-index "$T/p-$f" "${fmt[@]}" --quiet --out "$T/p-$f-one"
	for i in 0 1 2 3; do shardfs-index "$T/p-$f" "${fmt[@]}" --quiet --part $i/4; done
	shardfs-index "$T/p-$f" --merge --quiet
	expect_eq "$f: 4 parts merged = one run" \
		"$(cd "$T/p-$f/.shardfs" && sha256sum manifest.json *.bin)" \
		"$(cd "$T/p-$f-one" && sha256sum manifest.json *.bin)"
done
# the tables one run writes are those of the indexer that held them in
# memory (before it spilled them to disk): names and bytes; and the
# boundary table's blocks file, which came later and left them unchanged
expect_eq "tar: the tables of one run, as before the spilling indexer" \
	"$(cd "$T/p-tar-one" && sha256sum *.bin)" \
	"a90c38cd9ebe2a9da52834ceb6b8612a019396d058d68d392fb93f7a3cf98381  blocks-d5f4d501339dcf98.bin
00bad16acda97eaa831c1c2e8b7941fc1cf9aa8bee8e0cc26fc11b6bccc76a81  digests-0e4f1fa3ac6f80d6.bin
bbd88d9157e74e79f8e5e44f97df4673c422c7e61b4ae3b4e09ef062b23b9545  samples-6347b08160d196c2.bin"
expect_eq "the parts hold every shard once, round robin" \
	"$(for i in 0 1 2 3; do python3 -c 'import json,sys; print(" ".join(s["path"][-8:-4] for s in json.load(open(sys.argv[1]))["shards"]))' "$T/p-tar/.shardfs/part-$i-of-4/manifest.json"; done)" \
	"0000 0004 0008
0001 0005 0009
0002 0006 0010
0003 0007"
p=$T/p-tar/.shardfs
expect_run "a part is not an index to serve" 2 \
	"shardfs-plan: $p/part-1-of-4/manifest.json: this is part 1 of 4 of an index, not a whole one; join the parts with: shardfs-index $T/p-tar --merge" \
	-- shardfs-plan "$T/p-tar" --index "$p/part-1-of-4"
expect_run "merge: a part missing" 2 \
	"shardfs-index: $p/part-0-of-4: part 0 of 4, but 3 parts were given; give all 4 parts, once each" \
	-- shardfs-index "$T/p-tar" --merge "$p/part-0-of-4" "$p/part-1-of-4" "$p/part-2-of-4"
expect_run "merge: a part twice" 2 \
	"shardfs-index: $p/part-1-of-4 and $p/part-1-of-4 are both part 1 of 4; give each part once" \
	-- shardfs-index "$T/p-tar" --merge "$p/part-0-of-4" "$p/part-1-of-4" "$p/part-1-of-4" "$p/part-3-of-4"
shardfs-index "$T/p-tar" --quiet --part 1/2 --out "$T/p-half"
expect_run "merge: parts of another count" 2 \
	"shardfs-index: $T/p-half: part 1 of 2, but 4 parts were given; give all 2 parts, once each" \
	-- shardfs-index "$T/p-tar" --merge "$p/part-0-of-4" "$T/p-half" "$p/part-2-of-4" "$p/part-3-of-4"
expect_run "merge: a whole index is not a part" 2 \
	"shardfs-index: $T/p-tar-one: a whole index, not a part (shardfs-index --part I/N writes parts)" \
	-- shardfs-index "$T/p-tar" --merge "$T/p-tar-one"
expect_run "--part: I past N" 2 \
	"shardfs-index: --part 4/4: write I/N with N in 1..65536 and I in 0..N-1, e.g. --part 3/16" \
	-- shardfs-index "$T/p-tar" --part 4/4
expect_run "--part: not I/N" 2 \
	"shardfs-index: --part 3: write I/N, part I (0..N-1) of N, e.g. --part 3/16" \
	-- shardfs-index "$T/p-tar" --part 3
mkdir -p "$T/p-none"
expect_run "merge: no parts" 2 \
	"shardfs-index: $T/p-none/.shardfs: no parts (part-I-of-N) to merge; write them with shardfs-index $T/p-none --part I/N, or name their directories" \
	-- shardfs-index "$T/p-none" --merge

# --- one option table: the docs' lists are its rows, typos are named ---
docs_rows() { # FILE TABLE: the rows between that table's markers
	sed -n "/^<!-- options: $2 /,/^<!-- end options -->/p" "$1" | grep '^| `'
}
expect_eq "docs/plan.md lists the plan options" \
	"$(docs_rows "$TESTS/../docs/plan.md" plan)" "$(options-md plan)"
expect_eq "docs/view.md lists the daemon's options" \
	"$(docs_rows "$TESTS/../docs/view.md" mount)" "$(options-md mount)"
for key in $(options-md plan | cut -d'`' -f2 | cut -d= -f1); do
	shardfs-plan --help | grep -q "^  $key=" && ok || bad "shardfs-plan --help lacks $key"
	shardfs --help | grep -q "^  $key=" && ok || bad "shardfs --help lacks $key"
done
for key in $(options-md mount | cut -d'`' -f2 | cut -d= -f1); do
	shardfs --help | grep -q "^  $key=" && ok || bad "shardfs --help lacks $key"
done
expect_run "plan: a typo is named" 2 \
	"shardfs-plan: unknown option \"wrld\" (did you mean \"world\"?)" \
	-- shardfs-plan "$T/a-jsonl" -o wrld=2
expect_run "check: a typo is named" 2 \
	"shardfs-check: unknown option \"suffle\" (did you mean \"shuffle\"?)" \
	-- shardfs-check plan "$T/a-jsonl" -o world=2,suffle=none
expect_run "plan: an unknown option" 2 \
	"shardfs-plan: colour=blue: unknown option; the plan options are world, workers, replicas, epoch, seed, shuffle, block, remainder, batch, start, epoch_size, partition and rank" \
	-- shardfs-plan "$T/a-jsonl" -o colour=blue
finish
