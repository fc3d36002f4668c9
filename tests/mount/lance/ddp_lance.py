"""A DistributedDataParallel job (gloo) reading a Lance mount through the
recipe of docs/loaders.md.

Usage: ddp_lance.py RECIPE MNT SRC NAME EPOCHS OUT

Starts world processes (the mount's world; replicas=1), as torchrun would
(Debian 12's torchrun fails at start under Python 3.11), which join a gloo
group.  Rank r writes each epoch of EPOCHS ("0,1") to MNT/.shardfs/epoch
(every rank the same number: the mount is shared), waits at a barrier,
then reads MNT/r/ through the recipe's ShardfsLance with a DataLoader of
num_workers = the mount's workers and batch_size = the mount's batch, and
trains a linear model on the rows' vectors (DDP all-reduces every step: a
rank with more steps than another would hang, and gloo fails it after 120
s).  Each rank writes OUT/rank-<r>.json: per epoch its steps and the ids
it trained on, and rank 0 the epoch's plan counts.  Then the parent
checks, per epoch: equal steps on every rank, every batch full, every
id a live row of SRC, the distinct ids the plan's remaining rows less
its dropped ones, and all ids those plus exactly its padding.  Prints
"ok: ..." or what differs; exits 1 then.
"""
from __future__ import annotations

import collections
import datetime
import importlib.util
import json
import os
import subprocess
import sys
import tempfile


def rank_main(rank: int, world: int, args: list) -> None:
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel
    from torch.utils.data import DataLoader

    path, mnt, _src, name, epochs, out = args
    spec = importlib.util.spec_from_file_location("recipe", path)
    recipe = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(recipe)
    dist.init_process_group("gloo", init_method="file://"
                            + os.environ["DDP_STORE"], rank=rank,
                            world_size=world,
                            timeout=datetime.timedelta(seconds=120))
    with open(os.path.join(mnt, ".shardfs", "plan.json")) as f:
        opts = json.load(f)["options"]
    torch.manual_seed(0)
    model = DistributedDataParallel(torch.nn.Linear(4, 1))
    opt = torch.optim.SGD(model.parameters(), lr=1e-6)
    loader = DataLoader(recipe.ShardfsLance(mnt, rank, name,
                                            columns=["id", "vec"]),
                        batch_size=opts["batch"],
                        num_workers=opts["workers"])
    report = {}
    for epoch in [int(e) for e in epochs.split(",")]:
        with open(os.path.join(mnt, ".shardfs", "epoch"), "w") as f:
            f.write(str(epoch))
        dist.barrier()
        ids, steps, sizes = [], 0, set()
        for batch in loader:
            x = torch.stack(batch["vec"], 1).float()
            y = batch["id"].float().unsqueeze(1)
            loss = torch.nn.functional.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            ids += batch["id"].tolist()
            sizes.add(len(batch["id"]))
            steps += 1
        e = {"steps": steps, "ids": ids, "sizes": sorted(sizes)}
        if rank == 0:
            with open(os.path.join(mnt, ".shardfs", "plan.json")) as f:
                p = json.load(f)
            e["plan"] = {k: p[k] for k in
                         ("per_reader", "remaining", "padding", "dropped")}
            e["plan"]["epoch"] = p["options"]["epoch"]
        report[epoch] = e
        dist.barrier()
    with open(os.path.join(out, f"rank-{rank}.json"), "w") as f:
        json.dump(report, f)
    dist.destroy_process_group()


def main() -> int:
    if sys.argv[1] == "--rank":
        rank_main(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:])
        return 0
    path, mnt, src, name, epochs, out = sys.argv[1:7]
    with open(os.path.join(mnt, ".shardfs", "plan.json")) as f:
        opts = json.load(f)["options"]
    world = opts["world"]
    # the ranks meet in a file store, not on a port picked free here:
    # another test's connections can take it before rank 0 binds it
    env = dict(os.environ, DDP_STORE=tempfile.mkdtemp(dir=out) + "/store")
    procs = [subprocess.Popen([sys.executable, __file__, "--rank", str(r),
                               str(world)] + sys.argv[1:7], env=env)
             for r in range(world)]
    codes = [p.wait(timeout=600) for p in procs]
    if any(codes):
        print(f"ranks exited {codes}")
        return 1

    import lance

    live = set(lance.dataset(src).to_table(columns=["id"])
               .column("id").to_pylist())
    reports = []
    for r in range(world):
        with open(os.path.join(out, f"rank-{r}.json")) as f:
            reports.append(json.load(f))
    bad = []
    for epoch in epochs.split(","):
        p = reports[0][epoch]["plan"]
        steps = {reports[r][epoch]["steps"] for r in range(world)}
        served = collections.Counter(
            i for r in range(world) for i in reports[r][epoch]["ids"])
        if p["epoch"] != int(epoch):
            bad.append(f"epoch {epoch}: the mount served {p['epoch']}")
        if len(steps) != 1:
            bad.append(f"epoch {epoch}: steps differ: {steps}")
        if any(reports[r][epoch]["sizes"] != [opts["batch"]]
               for r in range(world)):
            bad.append(f"epoch {epoch}: a batch is not full")
        if not set(served) <= live:
            bad.append(f"epoch {epoch}: ids that are no live row")
        if len(served) != p["remaining"] - p["dropped"] or \
                sum(served.values()) != p["remaining"] - p["dropped"] + \
                p["padding"]:
            bad.append(f"epoch {epoch}: {len(served)} distinct, "
                       f"{sum(served.values())} served; plan: {p}")
    steps = reports[0][epochs.split(",")[0]]["steps"]
    print("\n".join(bad) if bad else
          f"ok: {world} ranks, {len(epochs.split(','))} epochs, {steps} "
          "steps each, every live row once plus the padding")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
