"""Check the Lance datasets a mount shows, with pylance.

Usage: check_mount.py SRC MNT NAME [--copies]

SRC is the source dataset, MNT the mount, NAME the dataset directory each
reader has (MNT/<rank>/<worker>/NAME; with epochs=N, <epoch>-NAME for
each epoch, plan.json then holding N plans).  The plan is MNT/.shardfs/plan.json.
For every reader of the plan, lance.dataset(reader_dir) must give:
count_rows() == the reader's samples == the plan's per_reader; to_table()
equal, column by column, to the source's live rows the reader's runs name,
in plan order; a scan with a filter the same rows as the filter applied to
those; data files that are symlinks to the source's (or, with --copies,
regular files of the mount with the source's bytes).  Over all readers:
every served id is a live row of the source (deleted rows never served),
the distinct ids are the plan's remaining rows less its dropped ones, and
the rows served are those plus exactly its padding.  Prints one line per
reader and a summary; exits 1 on a mismatch.
"""
from __future__ import annotations

import collections
import json
import os
import sys


def check_reader(lance, pa, src, mnt, rank, r, name, want, per_reader,
                 copies):
    """The table reader r's dataset under rank gives, or None (and a
    line saying why) when it is not what the plan says."""
    d = os.path.join(mnt, str(rank), str(r["worker"]), name)
    ds = lance.dataset(d)
    got = ds.to_table()
    fgot = ds.to_table(filter="id % 3 = 1")
    fwant = want.filter(pa.array(
        [i % 3 == 1 for i in want.column("id").to_pylist()], pa.bool_()))
    data = os.path.join(d, "data")
    files_ok = True
    for n in os.listdir(data):
        p = os.path.join(data, n)
        if copies:
            files_ok &= not os.path.islink(p) and os.path.isfile(p)
            with open(p, "rb") as a, \
                    open(os.path.join(src, "data", n), "rb") as b:
                files_ok &= a.read() == b.read()
        else:
            files_ok &= os.path.islink(p) and os.readlink(p) == \
                os.path.join(os.path.realpath(src), "data", n)
    ok = (got.equals(want) and ds.count_rows() == r["samples"]
          and r["samples"] == per_reader and fgot.equals(fwant)
          and fgot.num_rows > 0 and files_ok)
    print(f"rank {rank} worker {r['worker']}: {len(ds.get_fragments())} "
          f"fragments, {got.num_rows} rows, {fgot.num_rows} filtered: "
          f"{'ok' if ok else 'MISMATCH'}")
    return got if ok else None


def check_plan(lance, pa, src, mnt, plan, whole, live, name, copies):
    """Check every reader of one epoch's plan, and their union: the
    number of mismatches."""
    bad = 0
    served: collections.Counter = collections.Counter()
    reps = plan["options"].get("replicas", 1)
    for r in plan["readers"]:
        runs = [run for f in r["files"] for run in f["runs"]]
        want = pa.concat_tables([whole.slice(a, n) for a, n in runs]) \
            if runs else whole.slice(0, 0)
        # a reader of the plan is read by the replicas ranks of its group
        for rank in range(r["rank"] * reps, (r["rank"] + 1) * reps):
            got = check_reader(lance, pa, src, mnt, rank, r, name, want,
                               plan["per_reader"], copies)
            bad += got is None
        if got is not None:
            served.update(got.column("id").to_pylist())
    distinct = set(served)
    total = sum(served.values())
    union_ok = (distinct <= live
                and len(distinct) == plan["remaining"] - plan["dropped"]
                and total == plan["remaining"] - plan["dropped"]
                + plan["padding"])
    print(f"epoch {plan['options']['epoch']}: union: {len(distinct)} "
          f"distinct of {len(live)} live, {total} served, padding "
          f"{plan['padding']}, dropped {plan['dropped']}: "
          f"{'ok' if union_ok else 'MISMATCH'}")
    return bad + (not union_ok)


def main() -> int:
    import lance
    import pyarrow as pa

    src, mnt, name = sys.argv[1:4]
    copies = "--copies" in sys.argv[4:]
    with open(os.path.join(mnt, ".shardfs", "plan.json")) as f:
        plans = json.load(f)
    whole = lance.dataset(src).to_table()
    live = set(whole.column("id").to_pylist())
    bad = 0
    if isinstance(plans, list):  # epochs=N: "<epoch>-<name>" each
        width = len(str(plans[-1]["options"]["epoch"]))
        for plan in plans:
            bad += check_plan(lance, pa, src, mnt, plan, whole, live,
                              "%0*d-%s" % (width, plan["options"]["epoch"],
                                           name), copies)
    else:
        bad += check_plan(lance, pa, src, mnt, plans, whole, live, name,
                          copies)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
