#!/usr/bin/env python3
"""The wids recipe of docs/loaders.md on a workers=1 mount.

  wids_check.py cache SRC MNT CACHE   every rank read through the recipe
                                      (cache_dir CACHE/<rank>/<epoch>) by
                                      a DataLoader of 2 workers, in index
                                      order: exactly the plan's samples
  wids_check.py inplace SRC MNT CACHE wids reading rank 0's shard list
                                      (the recipe's) where it lies, not
                                      copied: raises what wids raises

Prints a summary and exits 1 with a line per finding.
"""
import json
import os
import sys

from torch.utils.data import DataLoader

import recipes
from expect import Source, fail, finish


def status(mnt):
    return json.load(open(os.path.join(mnt, ".shardfs", "status")))


def cache(src, mnt, cache_root):
    st = status(mnt)
    o = {k: st["options"][k] for k in ("world", "workers", "epoch", "seed",
                                       "shuffle", "block", "remainder",
                                       "batch", "start", "partition")}
    readers, c = Source(src).readers(o)
    recipe = recipes.load("wids")
    for rank in range(o["world"]):
        cache_dir = os.path.join(cache_root, str(rank), str(o["epoch"]))
        ds = recipe.shardfs_wids(mnt, rank, cache_dir, transformations=[])
        loader = DataLoader(ds, batch_size=4, num_workers=2,
                            collate_fn=lambda b: [s["__key__"] for s in b])
        got = [k for batch in loader for k in batch]
        if got != readers[rank]:
            fail("rank %d read %d samples %s..., the plan says %d %s..."
                 % (rank, len(got), got[:3], len(readers[rank]),
                    readers[rank][:3]))
        # beside the copies, wids up to 0.2.86 leaves <copy>.lock and
        # <copy>._<pid>_ files behind
        files = sorted(os.listdir(os.path.join(mnt, str(rank), "0")))
        copies = set(os.listdir(cache_dir))
        if not copies.issuperset(files):
            fail("rank %d: %s not copied into %s"
                 % (rank, sorted(set(files) - copies), cache_dir))
    print("wids: %d ranks x %d samples in the plan's order, each rank's "
          "files copied to its cache_dir" % (o["world"], c))


def inplace(mnt, cache_root):
    import wids
    shards = recipes.load("wids").shardfs_wids(mnt, 0, cache_root).shards
    wids.ShardListDataset(shards, localname=lambda url: url,
                          transformations=[])[0]


def main():
    if sys.argv[1] == "cache":
        cache(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        inplace(sys.argv[3], sys.argv[4])
    return finish()


if __name__ == "__main__":
    sys.exit(main())
