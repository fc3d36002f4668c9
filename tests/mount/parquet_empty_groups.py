"""Parquet files with row groups of no rows, as pyarrow writes them, for
tests/mount/test_parquet.sh.

  parquet_empty_groups.py write DIR   writes into DIR:
      edges.parquet   row groups of 0, 50, 0, 0, 70 and 0 rows (a string,
                      an INT64 and a list column, dictionaries on: an empty
                      row group's chunks are an empty dictionary page and
                      data_page_offset 0)
      plain.parquet   0, 40, 0, 30 and 0 rows, no dictionaries (an empty
                      row group's chunks hold no bytes at all)
      only.parquet    one row group, of no rows
  parquet_empty_groups.py read MNT SRC
      every file of the view MNT of SRC read by pyarrow as exactly the
      rows its plan (MNT/.shardfs/plan.json) names; a line per reader,
      exit 1 on the first difference
"""

import json
import os
import sys

import pyarrow as pa
import pyarrow.parquet as pq


def table(a: int, b: int) -> pa.Table:
    return pa.table({
        "key": pa.array([f"k{i:05d}" for i in range(a, b)], pa.string()),
        "v": pa.array(range(a, b), pa.int64()),
        "l": pa.array([[i] * (i % 3) for i in range(a, b)],
                      pa.list_(pa.int32())),
    })


def write(path: str, sizes: list[int], **kw) -> None:
    row = 0
    with pq.ParquetWriter(path, table(0, 0).schema, **kw) as w:
        for n in sizes:
            # write_table of an empty table writes a row group of 0 rows
            w.write_table(table(row, row + n), row_group_size=1 << 20)
            row += n


def read(mnt: str, src: str) -> int:
    with open(f"{mnt}/.shardfs/plan.json") as f:
        plan = json.load(f)
    source = {}
    for r in plan["readers"]:
        d = f"{mnt}/{r['rank']}/{r['worker']}"
        names = sorted(os.listdir(d))
        if len(names) != len(r["files"]):
            print(f"{d}: {len(names)} files, the plan has {len(r['files'])}")
            return 1
        rows = 0
        for name, f in zip(names, r["files"]):
            if f["shard"] not in source:
                source[f["shard"]] = pq.read_table(
                    f"{src}/{f['shard']}").to_pylist()
            want = []
            for first, count in f["runs"]:
                want += source[f["shard"]][first:first + count]
            got = pq.read_table(f"{d}/{name}").to_pylist()
            if got != want:
                print(f"{d}/{name}: pyarrow reads {len(got)} rows, not "
                      f"the {len(want)} planned (runs {f['runs']})")
                return 1
            rows += len(got)
        print(f"{r['rank']}/{r['worker']}: {len(names)} files, {rows} rows")
    return 0


if __name__ == "__main__":
    if sys.argv[1] == "write":
        out = sys.argv[2]
        write(f"{out}/edges.parquet", [0, 50, 0, 0, 70, 0])
        write(f"{out}/plain.parquet", [0, 40, 0, 30, 0], use_dictionary=False)
        write(f"{out}/only.parquet", [0])
    else:
        sys.exit(read(sys.argv[2], sys.argv[3]))
