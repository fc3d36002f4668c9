"""A seed job users come from: a Lance dataset read with Lance's
SafeLanceDataset in a DDP job, here over a shardfs view.

    shardfs SRC/train.lance MNT -o world=2,workers=1,batch=8
    python lance_ddp.py MNT train.lance

Each of the 2 ranks (torch.multiprocessing.spawn, gloo on the CPU) reads
its rows through shardfs.lance_torch.safe_loader (Lance's get_safe_loader:
2 spawned workers, batch_size the mount's batch; no DistributedSampler)
and trains a DistributedDataParallel model one step per batch.  Rank 0
prints one line per rank, "rank R: S steps, N rows", then "distinct
rows: D" (the plan pads every rank to the same count, multiple of the
batch, with rows read again), and the job exits 1 unless every rank took
the same number of steps, every batch full.
"""
from __future__ import annotations

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
    everyone = [None] * world
    dist.all_gather_object(everyone, (steps, keys, full))
    if rank == 0:
        with open(out, "w") as f:
            for r, (s, k, _) in enumerate(everyone):
                f.write("rank %d: %d steps, %d rows\n" % (r, s, len(k)))
            f.write("distinct rows: %d\n"
                    % len({k for _, ks, _ in everyone for k in ks}))
            if not all(ok for _, _, ok in everyone):
                f.write("a batch was not full\n")
    dist.destroy_process_group()


def main() -> int:
    mnt, name = sys.argv[1], sys.argv[2]
    world = 2
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "out")
        mp.spawn(rank_main, args=(world, mnt, name, os.path.join(d, "store"),
                                  out), nprocs=world)
        text = open(out).read()
    print(text, end="")
    lines = text.splitlines()
    steps = {ln.split()[2] for ln in lines[:world]}
    return 0 if len(steps) == 1 and len(lines) == world + 1 else 1


if __name__ == "__main__":
    sys.exit(main())
