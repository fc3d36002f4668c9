#!/usr/bin/env python3
"""Loaders that know nothing about ranks, pointed at a shardfs view.

  legacy.py folder SRC MNT       torchvision ImageFolder (map-style) over
                                 MNT/<rank>/0 of a files dataset, through a
                                 plain DataLoader with 2 workers
  legacy.py lines SRC MNT        JSONL lines of every MNT/<rank>/<worker>/
  legacy.py glob SRC MNT RANK    glob('MNT/RANK/*/*.tar') read with tarfile
  legacy.py epochs SRC MNT       a workers directory listed once, with
                                 epochs=N: N epochs, each a permutation

MNT is one mount showing every rank.  Each mode checks what was read
against the source read directly and plan_reference.py, prints a summary
and exits 1 with a line per finding.
"""
import collections
import glob
import hashlib
import json
import os
import re
import sys

from expect import Source, check_union, fail, finish, sample_keys

import recipes


def status(mnt):
    return json.load(open(os.path.join(mnt, ".shardfs", "status")))


def plan_options(st):
    keys = ("world", "workers", "epoch", "seed", "shuffle", "block",
            "remainder", "batch", "start", "partition")
    return {k: st["options"][k] for k in keys}


def folder(src, mnt):
    import torch
    from torch.utils.data import DataLoader
    st = status(mnt)
    classes = sorted(d for d in os.listdir(src) if not d.startswith("."))
    # every source image by content: (class, key)
    by_digest = {}
    for c in classes:
        for name in os.listdir(os.path.join(src, c)):
            if name.endswith(".jpg"):
                data = open(os.path.join(src, c, name), "rb").read()
                by_digest[hashlib.sha256(data).digest()] = (c, name)
    recipe = recipes.load("torch_folder")
    per_rank = []
    partial = 0
    torch.manual_seed(0)
    for rank in range(st["options"]["world"]):
        ds = recipe.shardfs_image_folder(
            os.path.join(mnt, str(rank)), classes,
            loader=lambda p: open(p, "rb").read())
        partial += len(ds.classes) < len(classes)
        loader = DataLoader(ds, batch_size=4, shuffle=True, num_workers=2,
                            collate_fn=list)
        got = []
        for batch in loader:
            for data, label in batch:
                cls, name = by_digest[hashlib.sha256(data).digest()]
                if classes[label] != cls:
                    fail("rank %d: %s has label %d (%s), its class is %s"
                         % (rank, name, label, classes[label], cls))
                got.append(name)
        if len(got) != st["plan"]["per_reader"]:
            fail("rank %d read %d images, per_reader is %d"
                 % (rank, len(got), st["plan"]["per_reader"]))
        per_rank.append(got)
    n, extra = check_union("ImageFolder", per_rank,
                           [name for _, name in by_digest.values()],
                           st["plan"]["padding"], st["plan"]["dropped"])
    if not partial:
        fail("every rank holds every class: the label mapping is not tested")
    print("ImageFolder: %d ranks x %d images with the right labels (%d ranks "
          "without some class), %d distinct of %d, %d padding"
          % (len(per_rank), len(per_rank[0]), partial, n, len(by_digest),
             extra))


def lines(src, mnt):
    st = status(mnt)
    source = Source(src)
    readers, c = source.readers(plan_options(st))
    recipe = recipes.load("lines")
    got = []
    for t in range(len(readers)):
        rank, worker = divmod(t, st["options"]["workers"])
        d = os.path.join(mnt, str(rank), str(worker))
        keys = [json.loads(line)["key"] for line in recipe.shardfs_lines(d)]
        if keys != readers[t]:
            fail("rank %d worker %d read %d lines, not the plan's %d"
                 % (rank, worker, len(keys), len(readers[t])))
        got.append(keys)
    n, extra = check_union("JSONL", got, source.keys, st["plan"]["padding"],
                           st["plan"]["dropped"])
    print("JSONL lines: %d readers x %d lines in plan order, %d distinct of "
          "%d, %d padding" % (len(got), c, n, len(source.keys), extra))


def glob_rank(src, mnt, rank):
    st = status(mnt)
    source = Source(src)
    readers, c = source.readers(plan_options(st))
    k = st["options"]["workers"]
    want = collections.Counter(
        key for w in range(k) for key in readers[rank * k + w])
    got = collections.Counter()
    files = glob.glob("%s/%d/*/*.tar" % (mnt, rank))
    for path in files:
        got.update(sample_keys(path))
    if got != want:
        fail("glob of rank %d read %d samples, not rank %d's %d"
             % (rank, sum(got.values()), rank, sum(want.values())))
    print("glob %s/%d/*/*.tar: %d files, %d samples = rank %d's share "
          "(%d workers x %d)" % (mnt, rank, len(files), sum(got.values()),
                                 rank, k, c))


def epochs(src, mnt):
    st = status(mnt)
    source = Source(src)
    o = plan_options(st)
    n = st["options"]["epochs"]
    k = st["options"]["workers"]
    first = o["epoch"]
    orders = {}
    for e in range(first, first + n):
        readers, c = source.readers(dict(o, epoch=e))
        per_epoch = []
        for t in range(len(readers)):
            d = os.path.join(mnt, str(t // k), str(t % k))
            names = sorted(os.listdir(d))  # listed once, for every epoch
            keys = [key for name in names
                    if int(re.match(r"(\d+)-", name).group(1)) == e
                    for key in sample_keys(os.path.join(d, name))]
            if keys != readers[t]:
                fail("epoch %d reader %d: %d samples, not the plan's %d"
                     % (e, t, len(keys), len(readers[t])))
            per_epoch.append(keys)
        check_union("epoch %d" % e, per_epoch, source.keys,
                    st["plan"]["padding"], st["plan"]["dropped"])
        orders[e] = per_epoch
    if len({json.dumps(v) for v in orders.values()}) != n:
        fail("two epochs have the same order")
    print("epochs=%d: every reader of %d lists its directory once and reads "
          "%d epochs of %d samples, each epoch the dataset once in its own "
          "order" % (n, len(orders[first]), n, c))


def main():
    mode, args = sys.argv[1], sys.argv[2:]
    if mode == "folder":
        folder(*args)
    elif mode == "lines":
        lines(*args)
    elif mode == "glob":
        glob_rank(args[0], args[1], int(args[2]))
    else:
        epochs(*args)
    return finish()


if __name__ == "__main__":
    sys.exit(main())
