"""One rank of a DDP job (gloo, CPU, the torch 2 of
tests/python/requirements.txt) reading a followed mount: python
ddp_follow_job.py MNT OUT NUM_WORKERS BATCH, with RANK,
WORLD_SIZE and DDP_STORE (the gloo group's file store) set by the caller
(follow_test.py ddp).  DataLoader worker w of rank r reads
MNT/r/w/stream.jsonl line by line to its end (a read blocks while the
source grows); every batch is all-reduced, as a training step is; the
lines read go to OUT/rank<r>.json, batch by batch.  The DataLoader's workers start from a
fork server (a worker forked from a rank running gloo's threads can hang:
docs/loaders.md)."""
from __future__ import annotations

import json
import os
import sys

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, IterableDataset, get_worker_info


class StreamLines(IterableDataset):
    def __init__(self, mnt: str, rank: int) -> None:
        self.mnt = mnt
        self.rank = rank

    def __iter__(self):
        w = get_worker_info()
        worker = w.id if w is not None else 0
        path = os.path.join(self.mnt, str(self.rank), str(worker),
                            "stream.jsonl")
        with open(path, "rb") as f:
            for line in f:
                yield line.decode()


def main() -> int:
    mnt, out, workers, batch = sys.argv[1:5]
    dist.init_process_group("gloo", init_method="file://"
                            + os.environ["DDP_STORE"],
                            rank=int(os.environ["RANK"]),
                            world_size=int(os.environ["WORLD_SIZE"]))
    rank = dist.get_rank()
    loader = DataLoader(StreamLines(mnt, rank), batch_size=int(batch),
                        num_workers=int(workers),
                        multiprocessing_context="forkserver")
    batches = []
    for b in loader:
        t = torch.ones(1)
        dist.all_reduce(t)  # a step: every rank must take it
        batches.append(list(b))
    with open(os.path.join(out, "rank%d.json" % rank), "w") as f:
        json.dump(batches, f)
    dist.barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
