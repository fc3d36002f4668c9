"""Check readers' Lance datasets against the plan, with pylance.

Usage: check_views.py LANCE_VIEW DATASET OUT < plan.json

For every reader of the plan (shardfs-plan --json), lance-view writes the
reader's dataset (its runs, in order) into OUT/<rank>-<worker>; pylance
must read from it exactly the source's live rows those runs name, in that
order (compared by every column), count_rows() must be the reader's
samples, and every data file must be the source's (a symlink to it: data
is never copied).  Prints one line per reader; exits 1 on a mismatch.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys


def main() -> int:
    import lance

    tool, src, out = sys.argv[1:4]
    plan = json.load(sys.stdin)
    whole = lance.dataset(src).to_table()
    bad = 0
    for r in plan["readers"]:
        runs = [run for f in r["files"] for run in f["runs"]]
        d = os.path.join(out, f"{r['rank']}-{r['worker']}")
        subprocess.run(
            [tool, src, d] + [f"{a}:{n}" for a, n in runs], check=True,
            stdout=subprocess.DEVNULL)
        ds = lance.dataset(d)
        got = ds.to_table()
        want = [whole.slice(a, n) for a, n in runs]
        import pyarrow as pa

        want = pa.concat_tables(want) if want else whole.slice(0, 0)
        data = os.path.join(d, "data")
        copied = [n for n in os.listdir(data)
                  if not os.path.islink(os.path.join(data, n))]
        ok = (got.equals(want) and ds.count_rows() == r["samples"]
              and got.num_rows == r["samples"] and not copied)
        print(f"reader {r['rank']}/{r['worker']}: {len(runs)} runs, "
              f"{len(ds.get_fragments())} fragments, {got.num_rows} rows: "
              f"{'ok' if ok else 'MISMATCH'}")
        bad += not ok
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
