"""Write the Lance datasets the Lance tests read, with pylance.

Usage: make_datasets.py OUT [--big] [--rich]

Writes under OUT, deterministically but for Lance's random file names:
  frags.lance   V2 version names; fragments of 1, 300, 300, 100 and 37
                rows and one of 6000 (appends), then deletes: a few rows
                (an Arrow deletion file) and 5000 rows of the 6000
                (a Roaring bitmap), then a second delete in a fragment
                that had one (a new deletion file replaces it)
  v1.lance      V1 version names (enable_v2_manifest_paths=False): 50
                rows, 20 appended, 1 deleted
  stable.lance  stable row ids (reader feature flag 2), 40 rows, 3 deleted
and, with --big, big.lance: 200 000 rows in fragments of 1 to 50 000,
deletes of both kinds.  Rows hold an int32 id (0, 1, ... in write
order) and a string key; with --rich, frags.lance and big.lance also a
nullable string, a list of ints and a fixed-size vector of floats.  Prints a JSON object: for each dataset its
version, count_rows() and, per fragment, id, physical_rows, deleted rows
and the deletion file's type.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path


def table(first: int, n: int, rich: bool = False):
    """Rows first..first+n-1: an id and a key; rich adds a nullable
    string (every 7th row null), a list of 0 to 2 ints and a fixed-size
    vector of 4 floats, each a function of the id."""
    import pyarrow as pa

    ids = range(first, first + n)
    cols = {
        "id": pa.array(ids, pa.int32()),
        "key": [f"k{i:06d}" for i in ids],
    }
    if rich:
        cols["note"] = pa.array(
            [None if i % 7 == 3 else "x" * (i % 13) for i in ids], pa.string())
        cols["tags"] = pa.array([[i, i + 1][: i % 3] for i in ids],
                                pa.list_(pa.int32()))
        cols["vec"] = pa.FixedSizeListArray.from_arrays(
            pa.array([float(i) + k / 4 for i in ids for k in range(4)],
                     pa.float32()), 4)
    return pa.table(cols)


def summary(path: Path) -> dict:
    import lance

    ds = lance.dataset(str(path))
    frags = []
    for f in ds.get_fragments():
        m = f.metadata
        d = m.deletion_file
        frags.append(
            {
                "id": m.id,
                "physical_rows": m.physical_rows,
                "deleted": d.num_deleted_rows if d else 0,
                "deletion": d.file_type if d else None,
            }
        )
    return {"version": ds.version, "rows": ds.count_rows(), "fragments": frags}


def write(out: Path, big: bool, rich: bool) -> dict:
    import lance

    made = {}
    p = out / "frags.lance"
    lance.write_dataset(table(0, 1, rich), p)
    lance.write_dataset(table(1, 700, rich), p, mode="append",
                        max_rows_per_file=300)
    lance.write_dataset(table(701, 37, rich), p, mode="append")
    lance.write_dataset(table(738, 6000, rich), p, mode="append")
    ds = lance.dataset(p)
    ds.delete("id IN (3, 5, 250, 400, 720)")
    ds = lance.dataset(p)
    ds.delete("id >= 1000 AND id < 6000")
    ds = lance.dataset(p)
    ds.delete("id = 7")
    made["frags.lance"] = summary(p)

    p = out / "v1.lance"
    lance.write_dataset(table(0, 50), p, enable_v2_manifest_paths=False)
    lance.write_dataset(table(50, 20), p, mode="append")
    lance.dataset(p).delete("id = 60")
    made["v1.lance"] = summary(p)

    p = out / "stable.lance"
    lance.write_dataset(table(0, 40), p, enable_stable_row_ids=True)
    lance.dataset(p).delete("id IN (0, 1, 39)")
    made["stable.lance"] = summary(p)

    if big:
        p = out / "big.lance"
        first = 0
        for n in (1, 50000, 17, 30000, 4999, 50000, 33, 64983):
            mode = "create" if first == 0 else "append"
            lance.write_dataset(table(first, n, rich), p, mode=mode)
            first += n
        ds = lance.dataset(p)
        ds.delete("id % 1000 = 7")
        ds = lance.dataset(p)
        ds.delete("id >= 60000 AND id < 75000")
        made["big.lance"] = summary(p)
    return made


def main() -> int:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    print(json.dumps(write(out, "--big" in sys.argv[2:],
                           "--rich" in sys.argv[2:]), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
