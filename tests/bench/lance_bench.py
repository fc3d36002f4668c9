"""The pylance side of tests/bench/bench_lance.sh.

Usage:
  lance_bench.py write-frags OUT FRAGMENTS ROWS DELETE
      a dataset of FRAGMENTS fragments of ROWS rows each (id int64, key
      string), written by one write_dataset with max_rows_per_file=ROWS;
      then, when DELETE is 1, the rows id % 100 = 7 deleted (a deletion
      file in every tenth fragment when ROWS is 10)
  lance_bench.py write-scan OUT ROWS DIM FRAGMENT_ROWS DELETE
      ROWS rows (id int64, key string, vec: DIM float32) in fragments of
      FRAGMENT_ROWS rows, then, when DELETE is 1, the rows
      id % 100 in (7, 42) deleted (a deletion file in every fragment)
  lance_bench.py count DIR RUNS
      pylance's own count of DIR's live rows in one process: the import,
      the first lance.dataset(DIR).count_rows(), and the median of RUNS
      more (each a new lance.dataset()), as one line
  lance_bench.py scan SRC VIEW PLAN RANK WORLD BATCH RUNS [--sampler]
      one rank's rows: VIEW (a reader's dataset of the mount, plan PLAN,
      workers=1) read whole with lance.dataset(VIEW).to_table(), against
      the same rows of SRC read by dataset.take() of the plan's row
      offsets and, with --sampler, by Lance's ShardedBatchSampler(RANK,
      WORLD) with batch_size=BATCH (the plan must then be
      partition=interleaved,batch=BATCH,shuffle=none over a multiple of
      WORLD*BATCH rows).  The three are run in turn RUNS times (after one
      warm-up each); the ids of each must be the plan's, in order, else
      exit 1.  Prints the medians as one line.
"""
from __future__ import annotations

import json
import statistics
import sys
import time


def write_frags(out: str, fragments: int, rows: int, delete: bool) -> None:
    import lance
    import pyarrow as pa

    n = fragments * rows
    t = pa.table({"id": pa.array(range(n), pa.int64()),
                  "key": [f"k{i:08d}" for i in range(n)]})
    lance.write_dataset(t, out, max_rows_per_file=rows,
                        max_rows_per_group=rows)
    if delete:
        lance.dataset(out).delete("id % 100 = 7")
    ds = lance.dataset(out)
    got = len(ds.get_fragments())
    if got != fragments:
        sys.exit(f"{out}: {got} fragments written, not {fragments}")


def write_scan(out: str, rows: int, dim: int, fragment_rows: int,
               delete: bool) -> None:
    import lance
    import numpy as np
    import pyarrow as pa

    first = 0
    while first < rows:  # a fragment's table at a time: bounded memory
        n = min(fragment_rows, rows - first)
        ids = np.arange(first, first + n, dtype=np.int64)
        vec = (ids[:, None] * dim + np.arange(dim)).astype(np.float32)
        t = pa.table({
            "id": ids,
            "key": [f"k{i:08d}" for i in ids],
            "vec": pa.FixedSizeListArray.from_arrays(
                pa.array(vec.reshape(-1)), dim),
        })
        lance.write_dataset(t, out, mode="append" if first else "create",
                            max_rows_per_file=fragment_rows)
        first += n
    if delete:
        lance.dataset(out).delete("id % 100 IN (7, 42)")


def count(d: str, runs: int) -> None:
    t0 = time.perf_counter()
    import lance
    t1 = time.perf_counter()
    rows = lance.dataset(d).count_rows()
    t2 = time.perf_counter()
    times = []
    for _ in range(runs):
        a = time.perf_counter()
        if lance.dataset(d).count_rows() != rows:
            sys.exit(f"{d}: count_rows() changed")
        times.append(time.perf_counter() - a)
    print(f"rows {rows} import {t1 - t0:.3f} first {t2 - t1:.4f} "
          f"median {statistics.median(times):.4f}")


def scan(src: str, view: str, plan_path: str, rank: int, world: int,
         batch: int, runs: int, sampler: bool) -> int:
    import lance
    import pyarrow as pa
    from lance.sampler import ShardedBatchSampler

    with open(plan_path) as f:
        plan = json.load(f)
    reader = [r for r in plan["readers"]
              if r["rank"] == rank and r["worker"] == 0]
    if plan["options"]["workers"] != 1 or len(reader) != 1:
        sys.exit(f"{plan_path}: not a plan of workers=1 with rank {rank}")
    offsets = [a + i for f in reader[0]["files"] for a, n in f["runs"]
               for i in range(n)]
    ds = lance.dataset(src)
    want = ds.take(offsets, columns=["id"]).column("id").to_pylist()

    def through_view():
        return lance.dataset(view).to_table()

    def take():
        return lance.dataset(src).take(offsets)

    def sharded():
        s = ShardedBatchSampler(rank, world)
        return pa.Table.from_batches(s(lance.dataset(src),
                                       batch_size=batch))

    ways = {"view": through_view, "take": take}
    if sampler:
        ways["sampler"] = sharded
    times: dict = {k: [] for k in ways}
    bad = 0
    for k, fn in ways.items():  # warm-up, and the rows checked
        got = fn()
        if got.column("id").to_pylist() != want:
            print(f"{k}: not the plan's {len(want)} rows of rank {rank} "
                  f"({got.num_rows} rows)")
            bad += 1
    for _ in range(runs):
        for k, fn in ways.items():
            a = time.perf_counter()
            fn()
            times[k].append(time.perf_counter() - a)
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"rows {len(want)} fragments "
          f"{len(lance.dataset(view).get_fragments())} "
          + " ".join(f"{k} {v:.4f}" for k, v in med.items()))
    return 1 if bad else 0


def main() -> int:
    a = sys.argv[1:]
    if a[0] == "write-frags":
        write_frags(a[1], int(a[2]), int(a[3]), a[4] == "1")
    elif a[0] == "write-scan":
        write_scan(a[1], int(a[2]), int(a[3]), int(a[4]), a[5] == "1")
    elif a[0] == "count":
        count(a[1], int(a[2]))
    elif a[0] == "scan":
        return scan(a[1], a[2], a[3], int(a[4]), int(a[5]), int(a[6]),
                    int(a[7]), "--sampler" in a[8:])
    else:
        sys.exit(__doc__)
    return 0


if __name__ == "__main__":
    sys.exit(main())
