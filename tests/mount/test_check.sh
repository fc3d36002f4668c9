#!/usr/bin/env bash
# shardfs-check: passes on correct views of every format (one mount, and
# one mount per rank), fails naming the fault on broken set-ups, and merge
# of per-rank reports gives the single-machine verdict; on followed views
# the judge names a window's order, overlap and missing samples, and a
# stream file that is not its windows.
. "$(dirname "$0")/../lib.sh"

shardfs-mkdata "$T/tar" --format tar --shards 7 --samples 3-30 --size 0-900 --seed 21
shardfs-mkdata "$T/jsonl" --format jsonl --shards 5 --samples 3-30 --seed 22
shardfs-mkdata "$T/tfrecord" --format tfrecord --shards 5 --samples 2-20 --seed 23
shardfs-mkdata "$T/files" --format files --shards 3 --samples 3-8 --members 1-3 --seed 24
for d in tar jsonl tfrecord; do shardfs-index "$T/$d" --quiet; done
shardfs-index "$T/files" --format files --quiet
M=$T/m

verdict() { python3 -c 'import json,sys; v=json.load(sys.stdin); v.pop("check"); print(json.dumps(v, sort_keys=True))'; }

# --- plan ---
out=$(shardfs-check plan "$T/tar" -o world=3,workers=2,batch=2)
expect_eq "plan passes" "$?:$(echo "$out" | tail -1)" "0:PASS: disjoint, nothing missing, equal counts"
out=$(shardfs-check plan "$T/tar" -o world=4,workers=2,replicas=2,batch=2)
expect_eq "plan with replicas passes" "$?:$(echo "$out" | head -1 | cut -d, -f1-2):$(echo "$out" | tail -1)" \
	"0:plan, epoch 0: world=4 × workers=2 = 8 readers (replicas=2: 4 shares):PASS: disjoint, nothing missing, equal counts"
out=$(shardfs-check plan "$T/tar" -o world=2,shuffle=samples --epochs 4-6)
expect_eq "plan --epochs: three verdicts" "$(echo "$out" | grep -c '^PASS')" 3
expect_eq "plan --epochs: order changes" "$(echo "$out" | grep -c '^order: .* of positions hold another sample than in epoch [45]$')" 2
out=$(shardfs-check plan "$T/tar" -o world=2,shuffle=none --epochs 0-1)
[[ "$out" == *"order: 0.0% of positions hold another sample than in epoch 0 — the epochs are identical: is shuffle=none?"* ]] && ok || bad "plan: identical epochs not pointed out"
expect_run "plan: bad option" 2 "shardfs-check: workers=0 is out of range: use an integer in 1..1024" \
	-- shardfs-check plan "$T/tar" -o workers=0
shardfs-check bogus x 2> "$T/usage"
expect_eq "unknown subcommand: usage, exit 2" "$?:$(head -1 "$T/usage")" "2:usage: shardfs-check plan SRC -o OPTIONS [--index DIR] [--epochs A-B]"

# --- correct views pass: every format, one mount and one per rank ---
for g in "tar world=2,workers=2" "tar world=3,workers=2,shuffle=samples,block=4,remainder=drop,batch=2,start=7" \
	"jsonl world=2,workers=3" "tfrecord world=3,block=3" "files world=2,workers=2" \
	"tar world=4,workers=2,replicas=2,shuffle=samples,block=4"; do
	fmt=${g%% *} opts=${g#* }
	mount_view "$T/$fmt" "$M" "$opts" || bad "mount $g"
	out=$(shardfs-check view "$M")
	expect_eq "view passes: $g" "$?:$(echo "$out" | tail -1)" \
		"0:PASS: disjoint, nothing missing, equal counts, every sample's bytes and order as planned"
	unmount_view "$M"
done
# an index without hashes: the auditor hashes the source itself
cp -a "$T/tfrecord" "$T/nohash" && rm -rf "$T/nohash/.shardfs"
shardfs-index "$T/nohash" --quiet --no-hash
mount_view "$T/nohash" "$M" world=2,workers=2,block=3 || bad "mount nohash"
out=$(shardfs-check view "$M")
expect_eq "view passes with a --no-hash index" "$?:$(echo "$out" | tail -1)" \
	"0:PASS: disjoint, nothing missing, equal counts, every sample's bytes and order as planned"
unmount_view "$M"

# --jobs N bounds the threads: a Parquet file of 65 536 rows or more is
# hashed on the threads no other file keeps busy, in each pass (the
# source, its index having no hashes, then the view): --jobs 1 is one
# thread a pass (the pool's worker: one clone), --jobs 4 on one file a
# worker and 3 helpers a pass; the verdict is the same whatever the threads
venv=$(bash "$TESTS/python/venv.sh" "$TESTS/python/requirements.txt") ||
	bad "build the pyarrow venv"
mkdir "$T/pbig"
parquet_70000 "$venv/bin/python" "$T/pbig/rows.parquet" ||
	bad "write a Parquet file of 70000 rows"
shardfs-index "$T/pbig" --quiet --no-hash
mount_view "$T/pbig" "$M" world=1,workers=1 || bad "mount pbig"
for j in 1 4; do
	traced "$T/strace-$j" shardfs-check view "$M" --jobs $j --json \
		> "$T/pbig-$j.json" || bad "check with --jobs $j"
done
expect_eq "--jobs 1: one thread a pass" "$(threads_in "$T/strace-1")" 2
expect_eq "--jobs 4, one file: a worker and 3 hashing helpers a pass" \
	"$(threads_in "$T/strace-4")" 8
shardfs-check view "$M" --json > "$T/pbig-d.json" || bad "check, default jobs"
expect_eq "the same verdict with --jobs 1, 4 and the default" \
	"$(cmp "$T/pbig-1.json" "$T/pbig-d.json" && cmp "$T/pbig-4.json" "$T/pbig-d.json" && verdict < "$T/pbig-d.json")" \
	'{"dropped": 0, "findings": [], "more": 0, "padding": 0, "per_reader": 70000, "readers": 1, "readers_seen": 1, "remaining": 70000, "sources": [], "verdict": "pass"}'
unmount_view "$M"

# --- out of descriptors: the check of the shards against the index says
# so and how to fix it, never that the index is stale; and the threads
# it runs are those its descriptors allow ---
shardfs-mkdata "$T/many" --format jsonl --shards 300 --samples 2 --seed 25 >/dev/null
shardfs-index "$T/many" --quiet
# (at the lowest limits the dynamic loader may be the one that fails,
# whose words are its own)
for n in $(seq 4 12); do
	prlimit --nofile=$n shardfs-check plan "$T/many" -o world=2 --jobs 16 2>&1 |
		grep -v ': error while loading shared libraries: ' > "$T/nofile-$n"
done
expect_eq "out of descriptors: never \"stale\"" "$(cat "$T"/nofile-* | grep -c stale)" 0
expect_eq "out of descriptors: every refusal names the fix" \
	"$(cat "$T"/nofile-* | grep '^shardfs-check: ' | grep -v 'raise the limit of open files (ulimit -n) and try again$')" ""
expect_eq "out of descriptors: the shards' check refused" \
	"$(cat "$T"/nofile-* | grep -c "^shardfs-check: $T/many: its shard files could not be checked against the index: Too many open files; raise the limit of open files (ulimit -n) and try again$")" 1
expect_eq "out of descriptors: passes once the check may run" \
	"$(tail -qn1 "$T/nofile-12")" "PASS: disjoint, nothing missing, equal counts"

world=3
for r in 0 1 2; do mount_view "$T/tar" "$M$r" "world=$world,workers=2,rank=$r,seed=5" || bad "mount rank $r"; done
out=$(shardfs-check view "$M"0 "$M"1 "$M"2)
per=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["plan"]["per_reader"])' "$M"0/.shardfs/status)
expect_eq "one mount per rank passes" "$?:$(echo "$out" | head -1 | cut -d'(' -f1):$(echo "$out" | tail -1)" \
	"0:view: 6 of 6 readers, $per samples each :PASS: disjoint, nothing missing, equal counts, every sample's bytes and order as planned"
single=$(shardfs-check view "$M"0 "$M"1 "$M"2 --json | verdict)
for r in 0 1 2; do shardfs-check view "$M$r" --emit "$T/report-$r.json" > /dev/null; done
merged=$(shardfs-check merge "$T"/report-*.json --json | verdict)
expect_eq "merge = one audit of every mount (pass)" "$merged" "$single"

# --- broken set-ups fail, naming the fault ---
out=$(shardfs-check view "$M"0 "$M"1)
expect_eq "missing rank: exit 1" "$?" 1
expect_eq "missing rank: named" "$(echo "$out" | grep '^  coverage')" "  coverage: rank 2 is shown by no mount"
[ "$(echo "$out" | grep -c '^  missing: ')" -gt 0 ] && ok || bad "missing rank: samples not reported missing"
single=$(shardfs-check view "$M"0 "$M"1 --json | verdict)
merged=$(shardfs-check merge "$T/report-0.json" "$T/report-1.json" --json | verdict)
expect_eq "merge = one audit of every mount (missing rank)" "$merged" "$single"

mount_view "$T/tar" "$T/dup" "world=$world,workers=2,rank=1,seed=5" || bad "mount duplicate"
out=$(shardfs-check view "$M"0 "$M"1 "$M"2 "$T/dup")
expect_eq "same rank twice: exit 1" "$?" 1
expect_eq "same rank twice: named" "$(echo "$out" | grep '^  coverage')" "  coverage: rank 1 worker 0 is shown by 2 mounts
  coverage: rank 1 worker 1 is shown by 2 mounts"
[[ "$out" == *"  overlap: "*" is read 2 times (rank 1 worker "*" on $M"1", rank 1 worker "*" on $T/dup), the plan reads it 1 time"* ]] && ok || bad "same rank twice: no overlap named: $out"
unmount_view "$T/dup"

mount_view "$T/tar" "$T/other" "world=$world,workers=2,rank=2,seed=6" || bad "mount other seed"
out=$(shardfs-check view "$M"0 "$M"1 "$T/other")
expect_eq "different seeds: exit 1" "$?" 1
expect_eq "different seeds: named" "$(echo "$out" | grep '^  options')" "  options: ${M}0 and $T/other disagree: seed=5 vs seed=6"
[[ "$(echo "$out" | grep '^FAIL')" =~ ^FAIL:\ [0-9]+\ findings:\ 1\ options\ [0-9]+\ overlap\ [0-9]+\ missing$ ]] && ok || bad "different seeds: not options, overlap and missing: $(echo "$out" | grep '^FAIL')"
unmount_view "$T/other"

mount_view "$T/tar" "$T/other" "world=$world,workers=2,rank=2,seed=5,epoch=1" || bad "mount other epoch"
out=$(shardfs-check view "$M"0 "$M"1 "$T/other")
expect_eq "different epochs: named" "$?:$(echo "$out" | grep '^  options')" "1:  options: ${M}0 and $T/other disagree: epoch=0 vs epoch=1"
unmount_view "$T/other"
for r in 0 1 2; do unmount_view "$M$r"; done

# a shard modified after indexing, size and mtime kept: --verify finds it
cp -a "$T/jsonl" "$T/mod"
f="$T/mod/shard-000002.jsonl"
cp -p "$f" "$T/keep"
printf 'X' | dd of="$f" bs=1 seek=30 conv=notrunc status=none
touch -r "$T/keep" "$f"
mount_view "$T/mod" "$M" world=2 || bad "mount modified"
out=$(shardfs-check view "$M" --verify)
expect_eq "modified shard: exit 1" "$?" 1
[[ "$(echo "$out" | grep '^  source')" == "  source: shard-000002.jsonl: SHA-256 "*", the index says "* ]] && ok || bad "modified shard: --verify did not name it: $out"
unmount_view "$M"

# a view whose index went stale under it: named, and its files unreadable
# (served by the daemon: through a symlink the source is read directly,
# and the count and bytes findings name the damage instead)
mount_view "$T/mod" "$M" world=2,symlinks=0 || bad "mount stale"
echo '{"late": 1}' >> "$f"
out=$(shardfs-check view "$M")
expect_eq "stale index: exit 1" "$?" 1
[[ "$out" == *"  source: the index is stale: 1 shard file changed since it was built: shard-000002.jsonl (size "* ]] && ok || bad "stale index not named: $out"
[[ "$out" == *"cannot be read: "*"Input/output error"* ]] && ok || bad "stale index: unreadable file not named: $out"
unmount_view "$M"

# a progress line on a terminal; epochs=N mounts are refused
mount_view "$T/jsonl" "$M" world=2 || bad "mount for progress"
out=$(script -qec "shardfs-check view '$M'" /dev/null | tr '\r' '\n' | grep -c '^shardfs-check: reading view files ')
[ "$out" -ge 1 ] && ok || bad "no progress line on a terminal"
unmount_view "$M"
mount_view "$T/jsonl" "$M" world=2,epochs=2 || bad "mount epochs=2"
expect_run "epochs=2 refused" 2 "shardfs-check: $M is mounted with epochs=2: the auditor checks one epoch per mount; mount with epochs=1" \
	-- shardfs-check view "$M"
unmount_view "$M"

# followed views (follow=1): the judge's words for a window read in
# another order, a sample read twice (and so one missing), and a stream
# file that is not its window files.  Each view is kept as a copy of its
# status and files (the auditor reads nothing else of a mount), and the
# copies are spoilt.
mkdir -p "$T/fol"
for c in 0 1 2; do
	for l in 0 1 2 3 4 5 6; do printf '{"c":%d,"l":%d}\n' "$c" "$l"; done \
		> "$T/fol/chunk_0000$c.jsonl"
done
touch "$T/fol/.shardfs-end"
for r in 0 1; do
	mount_view "$T/fol" "$M" "follow=1,format=jsonl,window=8,world=2,workers=2,rank=$r" ||
		bad "mount follow rank $r"
	mkdir -p "$T/fc$r/.shardfs"
	cat "$M/.shardfs/status" > "$T/fc$r/.shardfs/status"
	cp -r "$M/$r" "$T/fc$r/"
	unmount_view "$M"
done
expect_eq "follow: the copies pass" \
	"$(shardfs-check view "$T/fc0" "$T/fc1" | tail -1)" \
	"PASS: disjoint, nothing missing, equal counts, every sample's bytes and order as planned"
w=$T/fc0/0/0/window-00000000.jsonl
cp "$w" "$T/w0"
{ sed -n 2p "$T/w0"; sed -n 1p "$T/w0"; } > "$w"
expect_eq "follow: a window in another order" \
	"$(shardfs-check view "$T/fc0" "$T/fc1" | tail -3; echo "exit ${PIPESTATUS[0]}")" \
	"FAIL: 2 findings: 1 bytes 1 order
  order: window 0: rank 0 worker 0 ($T/fc0), window-00000000.jsonl: the plan's samples in another order: sample 0 is chunk_00000.jsonl:1, the plan says chunk_00000.jsonl:0
  bytes: rank 0 worker 0 ($T/fc0): stream.jsonl is not its window files laid end to end: its bytes differ near byte 0 (window-00000000.jsonl)
exit 1"
cp "$T/w0" "$w"
cp -r "$T/fc0/0/1" "$T/w01"
cat "$T/fc0/0/0/window-00000001.jsonl" > "$T/fc0/0/1/window-00000001.jsonl"
expect_eq "follow: another reader's samples" \
	"$(shardfs-check view "$T/fc0" "$T/fc1" | tail -8)" \
	"FAIL: 7 findings: 3 bytes 2 overlap 2 missing
  bytes: window 1: rank 0 worker 1 ($T/fc0), window-00000001.jsonl, sample 0: read chunk_00001.jsonl:1, the plan says chunk_00001.jsonl:3
  bytes: window 1: rank 0 worker 1 ($T/fc0), window-00000001.jsonl, sample 1: read chunk_00001.jsonl:2, the plan says chunk_00001.jsonl:4
  overlap: window 1: chunk_00001.jsonl:1 is read 2 times, the plan reads it 1
  overlap: window 1: chunk_00001.jsonl:2 is read 2 times, the plan reads it 1
  missing: window 1: chunk_00001.jsonl:3 is read 0 times, the plan reads it 1
  missing: window 1: chunk_00001.jsonl:4 is read 0 times, the plan reads it 1
  bytes: rank 0 worker 1 ($T/fc0): stream.jsonl is not its window files laid end to end: its bytes differ near byte 28 (window-00000001.jsonl)"
rm -r "$T/fc0/0/1" && mv "$T/w01" "$T/fc0/0/1"
echo '{"y":2}' >> "$T/fc1/1/1/stream.jsonl"
expect_eq "follow: a stream longer than its windows" \
	"$(shardfs-check view "$T/fc0" "$T/fc1" | tail -2)" \
	"FAIL: 1 finding: 1 bytes
  bytes: rank 1 worker 1 ($T/fc1): stream.jsonl is not its window files laid end to end: it goes on after its window files end near byte 84"

expect_run "not a view" 2 "shardfs-check: $T/tar/.shardfs/status: cannot read the view's status (unable to open $T/tar/.shardfs/status: No such file or directory); is a shardfs view mounted there?" \
	-- shardfs-check view "$T/tar"
echo '{}' > "$T/bad.json"
expect_run "bad report" 2 "shardfs-check: $T/bad.json: not a shardfs-check report; write reports with shardfs-check view --emit" \
	-- shardfs-check merge "$T/bad.json"
finish
