#!/usr/bin/env python3
"""A DistributedDataParallel training job reading shardfs mounts.

Usage: ddp.py --world W --workers K --batch B --mounts M0,M1,... \
              --epochs E0,E1,... --out DIR [--steps S] [--timeout SEC]
              [--recipe webdataset]
       ddp.py --world W --workers K --batch B --source SRC ...

Starts W rank processes, as torchrun would (Debian 12's torchrun fails at
start under Python 3.11), which join a gloo group; rank r
reads MNT_r/r/ (its own mount, as on a separate node) through the
ShardfsTar recipe of docs/loaders.md with a DataLoader of K workers and
batch_size B, trains a linear model (DDP all-reduces every step), and
switches its mount to each epoch through the recipe's set_epoch.  With
--recipe webdataset it reads through the WebDataset recipe instead (a
pipeline ending in wds.batched(B), a DataLoader with batch_size=None),
built once and kept across the epochs like the DataLoader.  With
--steps it stops every epoch after S steps (a job that is stopped).
Every rank writes DIR/rank-<r>.json: per epoch the keys of each batch it
trained on, its mean loss and the epoch's wall time.  A rank that runs more steps than another
blocks in the all-reduce; after --timeout seconds gloo fails it, and the
job exits non-zero.

With --source the ranks read SRC directly, sharded in Python the way
loaders do it without shardfs: shards[rank::world], then
[worker::workers] (the benchmark's baseline; with shards of unequal sizes
it is the job that hangs).
"""
import argparse
import datetime
import json
import os
import struct
import subprocess
import sys
import tarfile
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, IterableDataset, get_worker_info

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import recipes  # noqa: E402


def features(data):
    return torch.tensor(struct.unpack("<4f", data))


def decode(sample):
    return sample["__key__"], features(sample["input"]), int(sample["cls"])


def webdataset_loader(rank_dir, workers, batch):
    """The WebDataset recipe as docs/loaders.md's training loop uses it."""
    import webdataset as wds
    ds = recipes.load("webdataset").shardfs_webdataset(
        rank_dir, wds.to_tuple("__key__", "input", "cls"),
        wds.map_tuple(None, features, int), wds.batched(batch))
    return DataLoader(ds, batch_size=None, num_workers=workers)


class SourceTar(IterableDataset):
    """The baseline: whole source shards dealt to ranks, then workers."""

    def __init__(self, src, rank, world, decode):
        shards = sorted(f for f in os.listdir(src) if f.endswith(".tar"))
        self.shards = [os.path.join(src, f) for f in shards[rank::world]]
        self.decode = decode

    def __iter__(self):
        info = get_worker_info()
        for path in self.shards[info.id::info.num_workers]:
            with tarfile.open(path, "r:") as tar:
                sample = {}
                for m in tar:
                    key, _, ext = m.name.partition(".")
                    if sample and sample["__key__"] != key:
                        yield self.decode(sample)
                        sample = {}
                    sample["__key__"] = key
                    sample[ext] = tar.extractfile(m).read()
                if sample:
                    yield self.decode(sample)


def run(args):
    rank = args.rank
    torch.set_num_threads(1)
    store = os.path.abspath(os.path.join(args.out, "store"))
    dist.init_process_group(
        "gloo", init_method="file://" + store, rank=rank, world_size=args.world,
        timeout=datetime.timedelta(seconds=args.timeout))
    torch.manual_seed(0)
    model = DistributedDataParallel(torch.nn.Linear(4, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    tar = recipes.load("torch_tar")
    if args.source:
        loader = DataLoader(SourceTar(args.source, rank, args.world, decode),
                            batch_size=args.batch, num_workers=args.workers)
    else:
        mnt = args.mounts[rank]
        rank_dir = os.path.join(mnt, str(rank))
        if args.recipe == "webdataset":
            loader = webdataset_loader(rank_dir, args.workers, args.batch)
        else:
            loader = DataLoader(tar.ShardfsTar(rank_dir, decode),
                                batch_size=args.batch,
                                num_workers=args.workers)
    log = {}
    for epoch in args.epochs:
        if not args.source:
            tar.set_epoch(mnt, epoch)
        dist.barrier()
        began = time.monotonic()
        batches, losses = [], []
        for keys, x, y in loader:
            if args.steps is not None and len(batches) == args.steps:
                break
            opt.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            batches.append(list(keys))
            losses.append(loss.item())
        log[str(epoch)] = {"batches": batches,
                           "loss": sum(losses) / max(len(losses), 1),
                           "seconds": time.monotonic() - began}
    with open(os.path.join(args.out, "rank-%d.json" % rank), "w") as f:
        json.dump(log, f)
    # which tar reader the torch_tar recipe took: the shardfs package's
    # when it imports, else tarfile
    with open(os.path.join(args.out, "reader-%d" % rank), "w") as f:
        f.write("tarfile" if tar.tar_samples is None else
                "%s.%s" % (tar.tar_samples.__module__,
                           tar.tar_samples.__name__))
    dist.barrier()
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--world", type=int, required=True)
    p.add_argument("--rank", type=int)
    p.add_argument("--workers", type=int, required=True)
    p.add_argument("--batch", type=int, required=True)
    p.add_argument("--mounts")
    p.add_argument("--source")
    p.add_argument("--epochs", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int)
    p.add_argument("--timeout", type=int, default=60)
    p.add_argument("--recipe", choices=["torch_tar", "webdataset"],
                   default="torch_tar")
    args = p.parse_args()
    args.mounts = args.mounts.split(",") if args.mounts else None
    args.epochs = [int(e) for e in args.epochs.split(",")]
    os.makedirs(args.out, exist_ok=True)
    if args.rank is not None:
        run(args)
        return 0
    ranks = [subprocess.Popen([sys.executable] + sys.argv + ["--rank", str(r)])
             for r in range(args.world)]
    status = 0
    for r, p in enumerate(ranks):
        if p.wait() != 0:
            print("rank %d exited with %d" % (r, p.returncode))
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
