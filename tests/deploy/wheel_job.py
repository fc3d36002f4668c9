"""Run by test_wheel.sh with the Python of the venv the wheel is installed
in: wheel_job.py SRC MNT PLAN0 PLAN1.  Mounts SRC on MNT through
shardfs.mount (world=2, workers=2), reads every file of every reader
(tarfile: the samples are the distinct keys of each tar), checks the
counts against `shardfs-plan --json` of epochs 0 and 1 (PLAN0, PLAN1),
switches to epoch 1, reads again, runs `shardfs-check view`, unmounts.
Prints one line per check; exits 1 on the first that fails."""
import json
import os
import subprocess
import sys
import tarfile

import shardfs

src, mnt, plan0, plan1 = sys.argv[1:5]


def fail(what):
    print("FAIL: " + what)
    sys.exit(1)


def counts(m):
    """{(rank, worker): samples read} from the files of every reader."""
    out = {}
    for rank in m.ranks:
        for worker in range(m.workers):
            n = 0
            for f in m.files(rank=rank, worker=worker):
                with tarfile.open(f) as t:
                    keys = [os.path.basename(x.name).split(".", 1)[0]
                            for x in t.getmembers() if x.isfile()]
                n += len(dict.fromkeys(keys))
            out[(rank, worker)] = n
    return out


def planned(path):
    with open(path) as f:
        plan = json.load(f)
    return {(r["rank"], r["worker"]): r["samples"] for r in plan["readers"]}


try:
    shardfs.mount(src, mnt, wrld=2)
    fail("mount with wrld=2 raised nothing")
except shardfs.ShardfsError as e:
    print("typo: %s" % e)

with shardfs.mount(src, mnt, world=2, workers=2) as m:
    print("mounted: %r is a shardfs.Mount: %s" % (m, isinstance(
        m, shardfs.Mount)))
    for epoch, plan in ((0, plan0), (1, plan1)):
        if epoch:
            m.set_epoch(epoch)
        got, want = counts(m), planned(plan)
        if got != want:
            fail("epoch %d: read %s, planned %s" % (epoch, got, want))
        if len(set(got.values())) != 1:
            fail("epoch %d: unequal counts %s" % (epoch, got))
        print("epoch %d: %d readers x %d samples, as planned"
              % (m.epoch, len(got), next(iter(got.values()))))
    r = subprocess.run(["shardfs-check", "view", mnt], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT)
    if r.returncode:
        fail("shardfs-check view: %s" % r.stdout.decode())
    print("shardfs-check view: ok")
print("unmounted: %s" % (not os.path.ismount(mnt)))
