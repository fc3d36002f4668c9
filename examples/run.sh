#!/usr/bin/env bash
# run.sh BUILD TESTS: the seed jobs of examples/ on real mounts, in the
# environment of tests/python/requirements.txt (tests/python/venv.sh),
# each one's output compared exactly.  Every mount is unmounted by its
# path on exit (killed by ctest's timeout, too: tests/guard.sh).
set -uo pipefail
BUILD=$(cd "$1" && pwd)
TESTS=$(cd "$2" && pwd)
EX=$TESTS/../examples
T=$(mktemp -d /tmp/shardfs-examples-XXXXXX)
. "$TESTS/guard.sh"
guard_scratch "$T"
mounted=()
cleanup() {
	local m
	for m in "${mounted[@]}"; do
		fusermount3 -u "$m" 2>/dev/null || umount -l "$m"
	done
	rm -rf --one-file-system "$T"
}
trap cleanup EXIT
venv=$(bash "$TESTS/python/venv.sh" "$TESTS/python/requirements.txt") || exit 2
PY=$venv/bin/python
export PATH="$BUILD:$PATH" PYTHONPATH=$EX/../python
failed=0
passed=0
# mount SRC MNT OPTS: the daemon in the background, until MNT is a mount
mount_view() {
	mkdir -p "$2"
	shardfs "$1" "$2" -o "$3" 2>>"$T/daemon.log" || return 1
	mounted+=("$2")
}
# expect NAME GOT WANT
expect() {
	if [ "$2" = "$3" ]; then
		echo "ok: $1"
		passed=$((passed + 1))
	else
		printf 'FAIL: %s\n--- got\n%s\n--- want\n%s\n' "$1" "$2" "$3"
		failed=$((failed + 1))
	fi
}

# Lance read with SafeLanceDataset in DDP: 4 fragments of 37, 50, 61 and
# 23 rows (171), world=2, batch=8: 88 rows a rank (5 of padding), 11 steps
"$PY" - "$T/lance/train.lance" <<'PY' || exit 2
import sys, lance, pyarrow as pa
first = 0
for i, n in enumerate((37, 50, 61, 23)):
    lance.write_dataset(pa.table({
        "key": ["row%04d" % k for k in range(first, first + n)],
        "x": [float(k) for k in range(first, first + n)]}),
        sys.argv[1], mode="append" if i else "create")
    first += n
PY
shardfs-index "$T/lance/train.lance" --quiet || exit 2
mount_view "$T/lance/train.lance" "$T/mnt-lance" world=2,workers=1,batch=8 ||
	exit 2
got=$(timeout 600 "$PY" "$EX/lance_ddp.py" "$T/mnt-lance" train.lance 2>"$T/err")
rc=$?
[ $rc -eq 0 ] || cat "$T/err" >&2
expect "lance_ddp.py: equal steps, full batches, every row read" "$rc
$got" "0
rank 0: 11 steps, 88 rows
rank 1: 11 steps, 88 rows
distinct rows: 171"

# Lightning DDP over part-*.parquet read with pyarrow: 5 files of 30, 41,
# 25, 50 and 19 rows, world=2,workers=2,batch=4, 2 epochs; the counts and
# every rank's keys of each epoch against shardfs-plan --json
"$PY" - "$T/parquet" <<'PY' || exit 2
import os, sys, pyarrow as pa, pyarrow.parquet as pq
os.makedirs(sys.argv[1])
first = 0
for i, n in enumerate((30, 41, 25, 50, 19)):
    pq.write_table(pa.table({
        "key": ["k%04d" % k for k in range(first, first + n)],
        "x": [float(k) for k in range(first, first + n)]}),
        os.path.join(sys.argv[1], "part-%05d.parquet" % i),
        row_group_size=8)
    first += n
PY
shardfs-index "$T/parquet" --quiet || exit 2
PO=world=2,workers=2,batch=4
mount_view "$T/parquet" "$T/mnt-parquet" $PO || exit 2
mkdir -p "$T/lout"
(cd "$T/lout" && timeout 900 "$PY" "$EX/lightning_parquet.py" \
	"$T/mnt-parquet" "$T/lout" 2 >"$T/lerr" 2>&1)
rc=$?
[ $rc -eq 0 ] || tail -40 "$T/lerr" >&2
# what the plans say, into want<r>: per epoch, steps and rows, then the
# keys in the order the DataLoader gives them (its 2 workers in turn)
"$PY" - "$T/parquet" "$PO" "$T" <<'PY' || exit 2
import json, subprocess, sys
import pyarrow.parquet as pq
src, opts, out = sys.argv[1:4]
keys = {}
for rank in range(2):
    lines, rows = [], []
    for e in range(2):
        p = json.loads(subprocess.run(
            ["shardfs-plan", src, "-o", "%s,epoch=%d" % (opts, e), "--json"],
            capture_output=True, text=True, check=True).stdout)
        per = []
        for w in range(2):
            r = next(x for x in p["readers"]
                     if (x["rank"], x["worker"]) == (rank, w))
            ks = []
            for f in r["files"]:
                if f["shard"] not in keys:
                    keys[f["shard"]] = pq.read_table(
                        "%s/%s" % (src, f["shard"])).column("key").to_pylist()
                for first, n in f["runs"]:
                    ks += keys[f["shard"]][first:first + n]
            per.append(ks)
        turns = [k for i in range(0, len(per[0]), 4)
                 for k in per[0][i:i + 4] + per[1][i:i + 4]]
        lines.append("epoch %d: %d steps, %d rows"
                     % (e, len(turns) // 4, len(turns)))
        rows += ["%d %s" % (e, k) for k in turns]
    with open("%s/want%d" % (out, rank), "w") as f:
        f.write("\n".join(lines + rows) + "\n")
PY
expect "lightning_parquet.py: exit status" "$rc" 0
for r in 0 1; do
	expect "lightning_parquet.py: rank $r's steps, rows and keys of epochs 0 and 1 are the plans'" \
		"$(cat "$T/lout/rank$r.txt" 2>/dev/null)" "$(cat "$T/want$r")"
	head -2 "$T/want$r"
done

# a weighted mixture read through datasets: a JSONL source and a Parquet
# one, proportion 3 : 1 of an epoch of 200, world=2,workers=2,block=8:
# the two ranks' rows add up to exactly 150 and 50
mkdir -p "$T/mix"
shardfs-mkdata "$T/mix/text" --format jsonl --shards 4 --samples 20-60 \
	>/dev/null && shardfs-index "$T/mix/text" --quiet &&
	shardfs-mkdata "$T/mix/tab" --format parquet --shards 3 \
		--samples 20-60 --seed 1 >/dev/null &&
	shardfs-index "$T/mix/tab" --quiet || exit 2
printf '%s' '{"sources": [{"path": "text", "proportion": 3},
 {"path": "tab", "proportion": 1}], "epoch_size": 200}' >"$T/mix/mix.json"
mount_view "$T/mix/mix.json" "$T/mnt-mix" world=2,workers=2,block=8 || exit 2
got=$(for r in 0 1; do
	HF_DATASETS_OFFLINE=1 HF_HUB_OFFLINE=1 HF_HOME=$T/hf RANK=$r \
		WORLD_SIZE=2 timeout 600 "$PY" "$EX/mixture_datasets.py" \
		"$T/mnt-mix" 2>>"$T/merr" || echo "rank $r failed"
done)
grep -q failed <<<"$got" && tail -20 "$T/merr" >&2
expect "mixture_datasets.py: each rank 100 rows, text 150 and tab 50 in all" \
	"$got
total: $(awk '{b += $6; t += $8} END {print "tab " b ", text " t}' <<<"$got")" \
	"$(grep -o 'rank [01]: 100 rows, tab [0-9]*, text [0-9]*' <<<"$got")
total: tab 50, text 150"

# a source still being written, two daemons as two nodes (follow=1, one
# per rank, the same source): a 2-rank DDP job reads its windows with
# shardfs.follow.windows while a producer appends 12 JSONL chunks of 3 to
# 30 lines; each reader's samples of every window are the ones
# shardfs-plan --window prints, every window acknowledged at the end
mkdir -p "$T/grow" "$T/fout"
FW=32
FO=follow=1,follow_timeout=300,format=jsonl,window=$FW,world=2,workers=2,batch=4
mount_view "$T/grow" "$T/mnt-f0" "$FO,rank=0" || exit 2
mount_view "$T/grow" "$T/mnt-f1" "$FO,rank=1" || exit 2
timeout 600 "$PY" "$EX/follow_ddp.py" "$T/fout" "$T/mnt-f0" "$T/mnt-f1" \
	>"$T/fgot" 2>"$T/ferr" &
fjob=$!
# the producer starts once both ranks read: the source is empty until
# then, so every step is taken while it writes or after
for _ in $(seq 1200); do
	[ "$(grep -c '^rank [01]: reading ' "$T/ferr")" -ge 2 ] && break
	kill -0 $fjob 2>/dev/null || break
	sleep 0.1
done
"$PY" - "$T/grow" "$FW" "$T/mnt-f0" "$T/mnt-f1" >"$T/fprod" <<'PY'
import json, os, random, sys, time
src, n, mnts = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
rng = random.Random(5)

def acks():
    return [x["windows_read"] for m in mnts for x in json.load(
        open(os.path.join(m, ".shardfs", "status")))["readers"]]

written, waited = 0, False
for c in range(12):
    tmp = os.path.join(src, "chunk_%05d.jsonl.tmp" % c)
    with open(tmp, "w") as f:
        for i in range(rng.randint(3, 30)):
            f.write('{"key": "c%02d-%02d"}\n' % (c, i))
            written += 1
    os.rename(tmp, tmp[:-len(".tmp")])
    time.sleep(rng.uniform(0.1, 0.6))
    # once 2 windows are complete, the rest only after every reader took
    # window 0 (windows() acknowledges it when it opens window 1): the
    # job trains while the source grows
    if written >= 2 * n and not waited:
        deadline = time.monotonic() + 300
        while min(acks()) < 1 and time.monotonic() < deadline:
            time.sleep(0.1)
        waited = min(acks()) >= 1
        print("follow: every reader acknowledged window 0 with %d samples "
              "written: %s" % (written, "yes" if waited else
                               "no, after 300 s: %s" % acks()))
        if not waited:
            break
open(os.path.join(src, ".shardfs-end"), "w").close()
PY
cat "$T/fprod"
wait $fjob
rc=$?
[ $rc -eq 0 ] || tail -30 "$T/ferr" >&2
# what the windows' plans say (shardfs-plan --window, the follow log read
# back) against what each reader trained on, window by window; and each
# mount's acknowledgements (status: windows_read, consumed)
"$PY" - "$T/grow" "$FW" "$T/fout" "$T/mnt-f0" "$T/mnt-f1" \
	>"$T/fcmp" <<'PY' || exit 2
import json, os, subprocess, sys
src, n, out, mnts = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
plans = [json.loads(ln) for ln in subprocess.run(
    ["shardfs-plan", src, "--window", n, "-o", "world=2,workers=2,batch=4"],
    capture_output=True, text=True, check=True).stdout.splitlines()]
lines = {}
def key(shard, i):
    if shard not in lines:
        with open(os.path.join(src, shard)) as f:
            lines[shard] = [json.loads(ln)["key"] for ln in f]
    return lines[shard][i]
want, got = [], []
for rank in range(2):
    done = json.load(open(os.path.join(out, "rank%d.json" % rank)))
    for w in range(2):
        for p in plans:
            r = next(x for x in p["readers"]
                     if (x["rank"], x["worker"]) == (rank, w))
            keys = [key(s, i) for s, first, count in r["runs"]
                    for i in range(first, first + count)]
            want.append("rank %d worker %d window %d: %s"
                        % (rank, w, p["window"], " ".join(keys)))
            mine = [k for ww, win, k in done["samples"]
                    if (ww, win) == (w, p["window"])]
            got.append("rank %d worker %d window %d: %s"
                       % (rank, w, p["window"], " ".join(mine)))
    st = json.load(open(os.path.join(mnts[rank], ".shardfs", "status")))
    got.append("rank %d acknowledged: %s, consumed %s" % (rank, sorted(
        (x["worker"], x["windows_read"]) for x in st["readers"]),
        st["follow"]["consumed"]))
    want.append("rank %d acknowledged: %s, consumed %s" % (rank, [
        (w, len(plans)) for w in range(2)], "chunk_00011.jsonl"))
per = sum(p["per_reader"] for p in plans)
print("%d windows of %s, %d samples, %d padding; every reader %d samples"
      % (len(plans), n, plans[-1]["samples"][1],
         sum(p["padding"] for p in plans), per))
print("\n".join(got))
print("==")
print("\n".join(want))
PY
head -1 "$T/fcmp"
expect "follow_ddp.py: exit status, each rank's steps, samples and windows" \
	"$rc
$(cat "$T/fgot")" "0
$("$PY" - "$T/fcmp" <<'PY'
import re, sys
head = open(sys.argv[1]).readline()
w, per = re.match(r"(\d+) windows .* every reader (\d+) samples", head).groups()
for r in range(2):
    print("rank %d: %d steps, %d samples, %s windows"
          % (r, 2 * int(per) // 4, 2 * int(per), w))
PY
)"
expect "follow_ddp.py: the job took window 0 while the source grew" \
	"$(grep -c 'acknowledged window 0 .*: yes$' "$T/fprod")" 1
expect "follow_ddp.py: every reader's samples of every window are its plan's, every window acknowledged" \
	"$(sed -n '2,/^==$/p' "$T/fcmp" | sed '$d')" "$(sed '1,/^==$/d' "$T/fcmp")"

# DALI over tars without shard_id/num_shards/pad_last_batch (the tf/DALI
# environment): 7 shards, world=2,workers=1,batch=4,block=9: every rank
# per_reader / 4 full batches, the .jpg bytes of the plan's samples
tfvenv=$(bash "$TESTS/python/venv.sh" "$TESTS/python/requirements-tf-dali.txt") ||
	exit 2
shardfs-mkdata "$T/tars" --format tar --shards 7 --samples 5-30 --seed 3 \
	>/dev/null && shardfs-index "$T/tars" --quiet || exit 2
DO=world=2,workers=1,batch=4,block=9
mount_view "$T/tars" "$T/mnt-tars" $DO || exit 2
for r in 0 1; do
	got=$(timeout 600 "$tfvenv/bin/python" "$EX/dali_webdataset.py" \
		"$T/mnt-tars" $r 2>"$T/derr") || tail -20 "$T/derr" >&2
	want=$("$PY" - "$T/tars" "$DO" $r <<'PY'
import hashlib, json, subprocess, sys, tarfile
src, opts, rank = sys.argv[1], sys.argv[2], int(sys.argv[3])
p = json.loads(subprocess.run(["shardfs-plan", src, "-o", opts, "--json"],
                              capture_output=True, text=True,
                              check=True).stdout)
r = next(x for x in p["readers"] if (x["rank"], x["worker"]) == (rank, 0))
h, n = hashlib.sha256(), 0
for f in r["files"]:
    with tarfile.open("%s/%s" % (src, f["shard"])) as t:
        jpgs = [t.extractfile(m).read() for m in t if m.name.endswith(".jpg")]
    for first, count in f["runs"]:
        for data in jpgs[first:first + count]:
            h.update(data)
            n += 1
print("rank %d: %d batches, %d samples, all full" % (rank, n // 4, n))
print(h.hexdigest())
PY
)
	expect "dali_webdataset.py: rank $r's batches and bytes are the plan's" \
		"$got" "$want"
done

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
