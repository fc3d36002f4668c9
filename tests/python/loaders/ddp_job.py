"""One rank of a DDP job (gloo, CPU) reading a shardfs mount through
shardfs.ShardfsDataset: python ddp_job.py MNT OUT EPOCHS NUM_WORKERS BATCH
[CONTEXT RANK WORLD], with DDP_STORE (the gloo group's file store) set
by the caller (test_ddp.py), and RANK, WORLD_SIZE unless given: given,
they are not in the environment, as in torch.multiprocessing.spawn's
jobs, and the DataLoader's workers start by the multiprocessing context
CONTEXT.
Each epoch: the mount's epoch switched (every rank its own mount), then
every batch all-reduced, as a training step is (with FSDP=1: a training
step of a model sharded by FSDP's fully_shard); the lines read are
written to OUT/rank<r>-epoch<e>.json as they came, batch by batch.
A MountMismatch ends the rank with its message on stderr and status 3."""
from __future__ import annotations

import json
import os
import sys

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader

import shardfs


def all_reduce_step(batch) -> None:
    t = torch.ones(1)
    dist.all_reduce(t)


def fsdp_step():
    """A training step of a model sharded by FSDP (fully_shard) over the
    ranks: its forward all-gathers the parameters and its backward
    reduce-scatters the gradients, collectives every rank must join."""
    from torch.distributed.fsdp import fully_shard
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(),
                                torch.nn.Linear(16, 1))
    for layer in model:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer)
    fully_shard(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def step(batch) -> None:
        x = torch.tensor([[float(len(line) % (i + 2)) for i in range(8)]
                          for line in batch])
        model(x).square().mean().backward()
        opt.step()
        opt.zero_grad()
    return step


def main() -> int:
    mnt, out, epochs, workers, batch = sys.argv[1:6]
    context = None
    if len(sys.argv) > 6:
        context, rank, world = sys.argv[6:9]
    else:
        rank, world = os.environ["RANK"], os.environ["WORLD_SIZE"]
    dist.init_process_group("gloo", init_method="file://"
                            + os.environ["DDP_STORE"], rank=int(rank),
                            world_size=int(world))
    rank = dist.get_rank()
    step = all_reduce_step
    if os.environ.get("FSDP") == "1":
        step = fsdp_step()
    mount = shardfs.Mount(mnt)
    ds = shardfs.ShardfsDataset(mount, batch_size=int(batch))
    loader = DataLoader(ds, batch_size=int(batch), num_workers=int(workers),
                        multiprocessing_context=context)
    try:
        for epoch in [int(e) for e in epochs.split(",")]:
            mount.set_epoch(epoch)
            dist.barrier()
            batches = []
            for b in loader:
                step(b)  # every rank must take it
                batches.append([line.decode() for line in b])
            with open(os.path.join(out, "rank%d-epoch%d.json"
                                   % (rank, epoch)), "w") as f:
                json.dump(batches, f)
    except shardfs.MountMismatch as e:
        # a DataLoader worker's exception comes back as the same type,
        # its message prefixed with the worker's traceback
        print("rank %d: MountMismatch: %s" % (rank, e), file=sys.stderr)
        return 3
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
