"""A job that stops mid-epoch and one that resumes it, through torchdata's
StatefulDataLoader over shardfs.ShardfsDataset: python resume_job.py MNT
OUT STOP [STATE], RANK and WORLD_SIZE in the environment.  Reads batches
of the mount's batch with 2 workers; with STOP >= 0 it saves the loader's
state_dict() to OUT/state after STOP batches and ends; with STATE it
loads that state first.  Writes the keys of its batches, in order, to
OUT/batches.json."""
from __future__ import annotations

import json
import os
import sys

import torch
from torchdata.stateful_dataloader import StatefulDataLoader

import shardfs


def key(sample) -> str:
    if isinstance(sample, bytes):
        return json.loads(sample)["key"]
    return sample["key"]


def main() -> int:
    mnt, out, stop = sys.argv[1], sys.argv[2], int(sys.argv[3])
    m = shardfs.Mount(mnt)
    ds = shardfs.ShardfsDataset(m, batch_size=m.batch, transform=key)
    loader = StatefulDataLoader(ds, batch_size=m.batch,
                                num_workers=m.workers)
    if len(sys.argv) > 4:
        loader.load_state_dict(torch.load(sys.argv[4]))
    batches = []
    for b in loader:
        batches.append(list(b))
        if len(batches) == stop:
            torch.save(loader.state_dict(), os.path.join(out, "state"))
            break
    with open(os.path.join(out, "batches.json"), "w") as f:
        json.dump(batches, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
