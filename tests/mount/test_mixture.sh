#!/usr/bin/env bash
# A mixture mounted for real: views named by source, every file read by GNU
# tar, Python and the auditor byte for byte, per-source counts exact,
# replicas identical, an epoch switch, and the negative control: ranks that mount different
# mixtures are named.
. "$(dirname "$0")/../lib.sh"

mkdir -p "$T/d"
shardfs-mkdata "$T/d/web" --format jsonl --shards 5 --samples 20-40 --seed 31 >/dev/null
shardfs-mkdata "$T/d/code" --format tar --shards 4 --samples 5-15 --size 1-300 --seed 32 >/dev/null
shardfs-mkdata "$T/d/math" --format tfrecord --shards 3 --samples 4-9 --seed 33 >/dev/null
for s in web code math; do shardfs-index "$T/d/$s" --quiet; done
printf '%s\n' '{"sources": [{"path": "d/web", "proportion": 5}, {"path": "d/code", "proportion": 3},
  {"path": "d/math", "proportion": 2}], "epoch_size": 400}' > "$T/mix.json"
printf '%s\n' '{"sources": [{"path": "d/web", "proportion": 5}, {"path": "d/code", "proportion": 3},
  {"path": "d/math", "proportion": 1}], "epoch_size": 400}' > "$T/other.json"
M=$T/m
opts=world=4,workers=2,block=6,shuffle=samples,epoch=3

mount_view "$T/mix.json" "$M" "$opts" || bad "mount the mixture"
out=$(shardfs-check view "$M")
expect_eq "auditor passes" "$?:$(echo "$out" | tail -1)" \
	"0:PASS: disjoint, nothing missing, equal counts, every sample's bytes and order as planned"
expect_eq "per-source reads" "$(echo "$out" | grep '^sources:')" \
	"sources: web 200 of 200, code 120 of 120, math 80 of 80"

# names say the source; the plan's files and the directory agree
names=$(cd "$M" && find . -mindepth 3 -type f -printf '%f\n' | cut -d- -f2- | cut -d. -f1 | sort -u | tr '\n' ' ')
expect_eq "file names start with the source" "$names" "code math web "
shardfs-plan "$T/mix.json" -o "$opts" --json > "$T/plan.json"
expect_eq "the plan of the mount is the reference's" \
	"$(python3 "$TESTS/cli/plan_reference.py" "$T/mix.json" "$T/plan.json")" \
	"plan matches the reference: 8 readers x 50 samples"

# every tar slice reads with GNU tar, every jsonl slice has whole lines,
# and the samples of each source match the plan (counted by a reader
# that is not ours: tar members by key, lines, TFRecord records)
got=$(python3 - "$M" <<'EOF'
import os, struct, sys, tarfile
m = sys.argv[1]
count = {}
for rank in sorted(os.listdir(m)):
    if rank.startswith("."):
        continue
    for w in sorted(os.listdir(os.path.join(m, rank))):
        d = os.path.join(m, rank, w)
        for name in sorted(os.listdir(d)):
            src = name.split("-", 1)[1].split(".")[0]
            p = os.path.join(d, name)
            if name.endswith(".tar"):
                with tarfile.open(p) as t:
                    n = len({x.name.split(".")[0] for x in t.getmembers()})
            elif name.endswith(".jsonl"):
                data = open(p, "rb").read()
                assert data.endswith(b"\n"), p
                n = data.count(b"\n")
            else:
                data, n, i = open(p, "rb").read(), 0, 0
                while i < len(data):
                    (length,) = struct.unpack_from("<Q", data, i)
                    i += 12 + length + 4
                    n += 1
            count[src] = count.get(src, 0) + n
print(" ".join("%s=%d" % kv for kv in sorted(count.items())))
EOF
)
expect_eq "independent readers count each source's share" "$got" "code=120 math=80 web=200"
for f in "$M"/*/*/*.tar; do
	tar -tf "$f" >/dev/null 2>&1 || { bad "GNU tar reads $f"; break; }
done
ok
st=$(python3 -c '
import json, sys
s = json.load(open(sys.argv[1]))
print(s["source"], [(x["name"], x["allocated"]) for x in s["mixture"]["sources"]])' "$M/.shardfs/status")
expect_eq "status names the mixture and its allocations" "$st" \
	"$T/mix.json [('web', 200), ('code', 120), ('math', 80)]"

# an epoch switch serves the next epoch of the mixture
echo 4 > "$M/.shardfs/epoch"
out=$(shardfs-check view "$M")
expect_eq "epoch 4 passes" "$?:$(echo "$out" | grep '^sources:')" \
	"0:sources: web 200 of 200, code 120 of 120, math 80 of 80"
expect_eq "fsname is the mixture file" "$(findmnt -no SOURCE "$M")" "$T/mix.json"
unmount_view "$M"

# replicas=2: ranks of a group read the same bytes
mount_view "$T/mix.json" "$M" "world=4,workers=2,replicas=2,block=6" || bad "mount replicas"
expect_eq "replicas: rank 0 and 1 read the same bytes" \
	"$(cd "$M/0" && cat */* | md5sum)" "$(cd "$M/1" && cat */* | md5sum)"
out=$(shardfs-check view "$M")
expect_eq "replicas: auditor passes" "$?:$(echo "$out" | tail -1)" \
	"0:PASS: disjoint, nothing missing, equal counts, every sample's bytes and order as planned"
unmount_view "$M"

# negative control: two ranks mount different mixtures
mount_view "$T/mix.json" "$M" "world=2,rank=0,block=6" || bad "mount rank 0"
mount_view "$T/other.json" "$T/m1" "world=2,rank=1,block=6" || bad "mount rank 1"
shardfs-check view "$M" --emit "$T/r0.json" 2>/dev/null
shardfs-check view "$T/m1" --emit "$T/r1.json" 2>/dev/null
expect_run "reports of different mixtures are refused, naming both" 2 \
	"shardfs-check: $T/r1.json: its ranks mount the mixture $T/other.json, the first report's mount the mixture $T/mix.json: every rank must mount the same mixture (same sources, weights and options)" \
	-- shardfs-check merge "$T/r0.json" "$T/r1.json"
expect_run "views of different mixtures are refused, naming both" 2 \
	"shardfs-check: $M serves $T/mix.json, $T/m1 serves $T/other.json: audit views of one source and index together" \
	-- shardfs-check view "$M" "$T/m1"
unmount_view "$T/m1"
mount_view "$T/mix.json" "$T/m1" "world=2,rank=1,block=6" || bad "mount rank 1"
shardfs-check view "$T/m1" --emit "$T/r1.json" 2>/dev/null
out=$(shardfs-check merge "$T/r0.json" "$T/r1.json")
expect_eq "the same mixture on both ranks merges to a pass" "$?:$(echo "$out" | tail -1)" \
	"0:PASS: disjoint, nothing missing, equal counts, every sample's bytes and order as planned"
unmount_view "$T/m1"
unmount_view "$M"
finish
