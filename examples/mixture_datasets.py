"""A seed job users come from: a weighted mixture of two datasets read
through Hugging Face `datasets` (where it was
`interleave_datasets([a, b], probabilities=[0.75, 0.25])`), here a
mixture file mounted by shardfs: the plan mixes, exactly.

    mix.json: {"sources": [{"path": "text", "proportion": 3},
                           {"path": "tab", "proportion": 1}],
               "epoch_size": 200}
    shardfs mix.json MNT -o world=2,workers=2,block=8
    RANK=r WORLD_SIZE=2 python mixture_datasets.py MNT

Each DataLoader worker loads its own files (JSONL or Parquet) with
`load_dataset(..., streaming=True)` and reads them through
shardfs.hf.rows (never split again among the workers).  Prints
"rank R: N rows, SOURCE n, SOURCE n" (sources in name order)."""
from __future__ import annotations

import os
import sys
from collections import Counter

from datasets import load_dataset
from torch.utils.data import DataLoader, IterableDataset

import shardfs
import shardfs.hf

FORMATS = {".jsonl": "json", ".parquet": "parquet"}


class Mixture(IterableDataset):
    """(source, key) of every row of this DataLoader worker's files."""

    def __init__(self, mnt: str, rank: int) -> None:
        self.mnt, self.rank = mnt, rank

    def __iter__(self):
        for f in shardfs.Mount(self.mnt).files(self.rank):
            source = f.name.split("-", 1)[1].split(".", 1)[0]
            ds = load_dataset(FORMATS[f.suffix], data_files=[str(f)],
                              split="train", streaming=True)
            for row in shardfs.hf.rows(ds):
                yield source, row["key"]


def main() -> None:
    mnt = sys.argv[1]
    rank = int(os.environ.get("RANK", "0"))
    m = shardfs.Mount(mnt)
    loader = DataLoader(Mixture(mnt, rank), batch_size=None,
                        num_workers=m.workers)
    counts = Counter(source for source, _ in loader)
    print("rank %d: %d rows, %s" % (rank, sum(counts.values()), ", ".join(
        "%s %d" % (s, counts[s]) for s in sorted(counts))))


if __name__ == "__main__":
    main()
