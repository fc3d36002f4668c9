"""A seed job users come from: a Lance dataset read with Lance's
SafeLanceDataset in a DDP job, here over a shardfs view.

    shardfs SRC/train.lance MNT -o world=2,workers=1,batch=8
    python lance_ddp.py MNT train.lance

Each of the 2 ranks (torch.multiprocessing.spawn, gloo on the CPU) reads
its rows through shardfs.lance_torch.safe_loader (Lance's get_safe_loader:
2 spawned workers, batch_size the mount's batch; no DistributedSampler)
and trains a DistributedDataParallel model one step per batch.  Once
the ranks have ended, the job prints one line per rank, "rank R: S
steps, N rows", then "distinct rows: D" (the plan pads every rank to the
same count, multiple of the batch, with rows read again), and exits 1
unless every rank took the same number of steps, every batch full.
"""
from __future__ import annotations

import json
import os
import sys
import tempfile

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def rank_main(rank: int, world: int, mnt: str, name: str, store: str,
              out: str) -> None:
    dist.init_process_group("gloo", init_method="file://" + store,
                            rank=rank, world_size=world)
    import shardfs
    from shardfs.lance_torch import safe_loader
    size = shardfs.Mount(mnt).batch
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(1, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    keys = []
    steps = 0
    full = True
    for batch in safe_loader(mnt, name, rank=rank, num_workers=2):
        x = batch["x"].float().reshape(-1, 1)
        model(x).square().mean().backward()  # gradients all-reduced
        opt.step()
        opt.zero_grad()
        keys.extend(batch["key"])
        full = full and len(batch["key"]) == size
        steps += 1
    with open("%s.%d" % (out, rank), "w") as f:
        json.dump({"steps": steps, "keys": keys, "full": full}, f)
    # No collective after the last step (the summary is made from the
    # ranks' files in main): one on tensors made in Python, as
    # all_gather_object's, can abort the rank as it ends, gloo's worker
    # thread releasing them while the interpreter finalizes
    # (follow_ddp.py, docs/loaders.md).
    dist.destroy_process_group()


def main() -> int:
    mnt, name = sys.argv[1], sys.argv[2]
    world = 2
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "out")
        mp.spawn(rank_main, args=(world, mnt, name, os.path.join(d, "store"),
                                  out), nprocs=world)
        ranks = []
        for r in range(world):
            with open("%s.%d" % (out, r)) as f:
                ranks.append(json.load(f))
    for r, done in enumerate(ranks):
        print("rank %d: %d steps, %d rows" % (r, done["steps"],
                                              len(done["keys"])))
    print("distinct rows: %d" % len({k for done in ranks
                                     for k in done["keys"]}))
    if not all(done["full"] for done in ranks):
        print("a batch was not full")
        return 1
    return 0 if len({done["steps"] for done in ranks}) == 1 else 1


if __name__ == "__main__":
    sys.exit(main())
