"""Run docs/loaders.md's Lance recipe through PyTorch's DataLoader.

Usage: torch_recipe.py RECIPE MNT SRC NAME

RECIPE is the recipe's code as docs/loaders.md has it, MNT a mount of the
Lance dataset SRC (replicas=1), NAME the readers' dataset directory.  For
every rank, a DataLoader over ShardfsLance with num_workers = the mount's
workers and batch_size 16 must give the same number of steps as every
other rank, and exactly the rows of the rank's readers in plan order,
interleaved batch by batch as the DataLoader takes its workers in turn.
Lance is opened in this process only once every DataLoader is done (the
workers are forked).  Prints "ok: N readers, M rows each" or what
differs; exits 1 then.
"""
from __future__ import annotations

import importlib.util
import json
import os
import sys

BATCH = 16


def main() -> int:
    from torch.utils.data import DataLoader

    path, mnt, src, name = sys.argv[1:5]
    spec = importlib.util.spec_from_file_location("recipe", path)
    recipe = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(recipe)
    with open(os.path.join(mnt, ".shardfs", "plan.json")) as f:
        plan = json.load(f)
    world = plan["options"]["world"]
    workers = plan["options"]["workers"]
    got, steps = {}, {}
    for rank in range(world):
        loader = DataLoader(
            recipe.ShardfsLance(mnt, rank, name, columns=["id", "vec"]),
            batch_size=BATCH, num_workers=workers)
        got[rank], steps[rank] = [], 0
        for batch in loader:
            assert len(batch["vec"]) == 4  # the vector's 4 columns
            got[rank] += batch["id"].tolist()
            steps[rank] += 1

    import lance

    ids = lance.dataset(src).to_table(columns=["id"]).column("id").to_pylist()
    bad = []
    if len(set(steps.values())) != 1:
        bad.append(f"steps differ: {steps}")
    for rank in range(world):
        chunks = []
        for r in plan["readers"]:
            if r["rank"] != rank:
                continue
            rows = [ids[a + i] for f in r["files"] for a, n in f["runs"]
                    for i in range(n)]
            chunks.append([rows[i:i + BATCH]
                           for i in range(0, len(rows), BATCH)])
        want = [x for k in range(max(map(len, chunks)))
                for c in chunks if k < len(c) for x in c[k]]
        if got[rank] != want:
            bad.append(f"rank {rank}: {len(got[rank])} rows, the plan's "
                       f"{len(want)} differ")
    print("\n".join(bad) if bad else
          f"ok: {len(plan['readers'])} readers, {plan['per_reader']} rows "
          "each")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
