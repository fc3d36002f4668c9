"""A seed job users come from: a DDP job training on a dataset that is
still being written (a producer appends JSONL chunks), here over
shardfs's follow=1 views, one daemon per node:

    # on node r (r = 0, 1), the same source (a shared file system)
    shardfs SRC MNT -o follow=1,format=jsonl,window=32,world=2,workers=2,batch=4,rank=r
    python follow_ddp.py OUT MNT0 MNT1

Both "nodes" are on this machine here, so the job gets each rank's mount
by argument: rank r (torch.multiprocessing.spawn, gloo on the CPU) reads
MNT<r> only, as a rank on node r reads its node's mount.  Each DataLoader
worker w reads its window files in order with shardfs.follow.windows
(which waits for a window to be complete and acknowledges each window
when the worker asks for the next, the last when the stream has ended),
batch_size the mount's batch, no DistributedSampler; the model is
trained one DistributedDataParallel step per batch.  Every rank writes
OUT/rank<r>.json: its steps, whether every batch was full and, per
sample, [worker, window, key] in the order trained on.  Once the ranks
have ended, the job prints one line per rank, "rank R: S steps, N
samples, W windows", and exits 1 unless every rank took the same number
of steps, every batch full.
"""
from __future__ import annotations

import json
import os
import sys
import tempfile

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.utils.data import DataLoader, IterableDataset, get_worker_info


class FollowedLines(IterableDataset):
    """The samples of one rank of a follow=1 mount: each DataLoader worker
    reads its own window files, as they come, line by line."""

    def __init__(self, mnt: str, rank: int) -> None:
        super().__init__()
        self.mnt = mnt
        self.rank = rank

    def __iter__(self):
        from shardfs import follow
        info = get_worker_info()
        worker = info.id if info else 0
        for path in follow.windows(self.mnt, self.rank, worker,
                                   timeout=300):
            window = int(os.path.basename(path).split("-")[1].split(".")[0])
            with open(path, "rb") as f:
                for line in f:
                    yield worker, window, json.loads(line)["key"]


def rank_main(rank: int, world: int, mnts: list, store: str,
              out: str) -> None:
    dist.init_process_group("gloo", init_method="file://" + store,
                            rank=rank, world_size=world)
    from shardfs import follow
    mnt = mnts[rank]
    st = follow.status(mnt)  # its plan options and its stream
    batch, workers = st["options"]["batch"], st["options"]["workers"]
    print("rank %d: reading %s (windows of %d samples)"
          % (rank, mnt, st["follow"]["window"]), file=sys.stderr, flush=True)
    # workers from a fork server: a rank runs gloo's threads, and a
    # worker forked from it can hang (docs/loaders.md)
    loader = DataLoader(FollowedLines(mnt, rank), batch_size=batch,
                        num_workers=workers,
                        multiprocessing_context="forkserver")
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(1, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    samples, steps, full = [], 0, True
    for workers, windows, keys in loader:
        x = windows.float().reshape(-1, 1)
        model(x).square().mean().backward()  # gradients all-reduced
        opt.step()
        opt.zero_grad()
        samples += [[int(w), int(k), key]
                    for w, k, key in zip(workers, windows, keys)]
        full = full and len(keys) == batch
        steps += 1
    with open(os.path.join(out, "rank%d.json" % rank), "w") as f:
        json.dump({"steps": steps, "full": full, "samples": samples}, f)
    # No collective after the last step: the job's summary is made from
    # the ranks' files once they have ended (main).  gloo's worker
    # threads outlive destroy_process_group (torch 2.15 keeps its
    # backend, and them, to the end of the process), and a collective
    # on tensors made in Python (all_gather_object's) leaves the last
    # reference to them to the worker thread that ran it: released
    # while the rank's interpreter finalizes, the thread takes the GIL,
    # CPython ends it with pthread_exit, and its unwinding through a
    # noexcept destructor aborts the rank ("terminate called without an
    # active exception", docs/loaders.md).  DDP's all-reduces are on
    # buckets made in C++, whose release needs no GIL.
    dist.destroy_process_group()


def main() -> int:
    out, mnts = sys.argv[1], sys.argv[2:]
    world = len(mnts)
    with tempfile.TemporaryDirectory() as d:
        mp.spawn(rank_main, args=(world, mnts, os.path.join(d, "store"),
                                  out), nprocs=world)
    ranks = []
    for r in range(world):
        with open(os.path.join(out, "rank%d.json" % r)) as f:
            ranks.append(json.load(f))
    for r, done in enumerate(ranks):
        print("rank %d: %d steps, %d samples, %d windows%s"
              % (r, done["steps"], len(done["samples"]),
                 len({k for _, k, _ in done["samples"]}),
                 "" if done["full"] else ", a batch not full"))
    ok = (len({done["steps"] for done in ranks}) == 1
          and all(done["full"] for done in ranks))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
