"""One rank of a DDP job (gloo, CPU) that runs every recipe of
docs/loaders.md inside its DataLoader workers: python recipes_job.py
CONFIG OUT CONTEXT RANK WORLD, with DDP_STORE (the gloo group's file
store) set by the caller (test_workers.py).  CONFIG (JSON) names the
mounts, a scratch directory, the iterable recipes and the map-style
recipes' lengths; the DataLoaders' two workers start by the
multiprocessing context CONTEXT (fork, forkserver, spawn), and the rank
and world are given to init_process_group, not in RANK, WORLD_SIZE (as
torch.multiprocessing.spawn's jobs have them).  Writes
OUT/rank<r>.json: {"iterable": {recipe: [keys of worker 0, of worker
1]}, "map": {recipe: keys in index order}, "steps": [...]}."""
from __future__ import annotations

import json
import os
import sys

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader

from recipe_readers import IterableRecipes, MapRecipes


def main() -> int:
    config, out, context, rank, world = sys.argv[1:6]
    cfg = json.loads(open(config).read())
    rank, world = int(rank), int(world)
    os.environ.pop("RANK", None)
    os.environ.pop("WORLD_SIZE", None)
    dist.init_process_group("gloo", init_method="file://"
                            + os.environ["DDP_STORE"], rank=rank,
                            world_size=world)
    got: dict = {"iterable": {}, "map": {}, "steps": []}
    it = DataLoader(IterableRecipes(cfg["iterable_mounts"], rank, cfg["tmp"],
                                    cfg["iterable"]),
                    batch_size=None, num_workers=2,
                    multiprocessing_context=context)
    steps = 0
    for name, w, key in it:
        got["iterable"].setdefault(name, [[], []])[w].append(key)
        steps += 1
    mp = DataLoader(MapRecipes(cfg["map_mounts"], rank, cfg["tmp"],
                               cfg["map"]),
                    batch_size=None, num_workers=2,
                    multiprocessing_context=context)
    for name, key in mp:
        got["map"].setdefault(name, []).append(key)
        steps += 1
    # every rank took as many steps: the all-reduce of a training step
    t = torch.tensor([steps])
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    got["steps"] = [steps, int(t.item())]
    with open(os.path.join(out, "rank%d.json" % rank), "w") as f:
        json.dump(got, f)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
