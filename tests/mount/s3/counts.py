"""counts.py MNT FORMAT PLAN.json: read every file of every reader under
MNT as a loader would (tar: tarfile, a sample the distinct keys of its
members; jsonl: lines) and compare the samples each reader read with the
samples shardfs-plan --json (PLAN.json) gives it.  Prints one line, exits 1
when they differ."""
import json
import os
import sys
import tarfile

mnt, fmt, plan_path = sys.argv[1:4]
with open(plan_path) as f:
    plan = json.load(f)
want = {(r["rank"], r["worker"]): r["samples"] for r in plan["readers"]}
got = {}
for rank, worker in want:
    d = os.path.join(mnt, str(rank), str(worker))
    n = 0
    for name in sorted(os.listdir(d)):
        path = os.path.join(d, name)
        if fmt == "tar":
            with tarfile.open(path) as t:
                keys = [os.path.basename(m.name).split(".", 1)[0]
                        for m in t.getmembers() if m.isfile()]
            n += len(dict.fromkeys(keys))
        else:
            with open(path, "rb") as f:
                n += sum(1 for line in f if line.strip())
    got[(rank, worker)] = n
if got != want:
    print("read %s, planned %s" % (sorted(got.items()), sorted(want.items())))
    sys.exit(1)
print("%d readers x %d samples, as planned" % (len(got), plan["per_reader"]))
