#!/usr/bin/env python3
"""An independent implementation of the plan, written from docs/plan.md.

Usage: plan_reference.py MANIFEST PLAN_JSON

Reads an index manifest and the JSON that `shardfs-plan --json` printed,
recomputes every reader's samples from the manifest and the options alone,
and exits 0 when they are the same sample for sample, 1 (with the first
difference) when not.  It shares no code with the C implementation.
"""
import json
import sys

MASK = (1 << 64) - 1
GAMMA = 0x9E3779B97F4A7C15


def mix(z):
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


class Prng:
    def __init__(self, seed, epoch, tag):
        self.state = mix(mix(mix(seed) ^ epoch) ^ tag)

    def next(self):
        self.state = (self.state + GAMMA) & MASK
        return mix(self.state)

    def below(self, bound):
        threshold = ((1 << 64) - bound) % bound
        while True:
            r = self.next()
            if r >= threshold:
                return r % bound

    def shuffle(self, a):
        for i in range(len(a) - 1, 0, -1):
            j = self.below(i + 1)
            a[i], a[j] = a[j], a[i]


def epoch_order(shards, o):
    """The epoch's samples as (shard path, sample) in order."""
    units = []  # (path, first, count, sliceable)
    for sh in sorted(shards, key=lambda s: s["path"].encode()):
        n = sh["samples"]
        sliceable = "bounds" in sh
        if n == 0:
            continue
        block = o["block"] if o["block"] and sliceable else n
        for first in range(0, n, block):
            units.append((sh["path"], first, min(block, n - first), sliceable))
    perm = list(range(len(units)))
    if o["shuffle"] != "none":
        Prng(o["seed"], o["epoch"], 0).shuffle(perm)
    order = []
    for u in perm:
        path, first, count, sliceable = units[u]
        inner = list(range(count))
        if o["shuffle"] == "samples" and sliceable:
            Prng(o["seed"], o["epoch"], u + 1).shuffle(inner)
        order.extend((path, first + k) for k in inner)
    return order


def readers(shards, o):
    """The plan's readers: one per (replica group, worker); rank r reads
    reader (r // replicas) * workers + worker."""
    order = epoch_order(shards, o)
    n = len(order) - o["start"]
    groups = o["world"] // o.get("replicas", 1)
    t = groups * o["workers"]
    b = o["batch"]
    if o["remainder"] == "pad":
        c = -(-n // t)
        c = -(-c // b) * b
    else:
        c = (n // t) // b * b
    seq = [order[o["start"] + q % n] for q in range(c * t)]
    if o.get("partition", "contiguous") == "contiguous":
        return [seq[r * c:(r + 1) * c] for r in range(t)], c
    # interleaved: batch g goes to group g % groups at loader step
    # s = g // groups, from worker s % workers
    out = [[] for _ in range(t)]
    for g in range(c * t // b):
        s = g // groups
        reader = (g % groups) * o["workers"] + s % o["workers"]
        out[reader].extend(seq[g * b:(g + 1) * b])
    return out, c


def main():
    manifest = json.load(open(sys.argv[1]))
    plan = json.load(open(sys.argv[2]))
    o = plan["options"]
    want, c = readers(manifest["shards"], o)
    if plan["per_reader"] != c:
        print("per_reader %d, reference %d" % (plan["per_reader"], c))
        return 1
    for r, reader in enumerate(plan["readers"]):
        got = [(f["shard"], first + k)
               for f in reader["files"]
               for first, count in f["runs"]
               for k in range(count)]
        if got != want[r]:
            i = next(i for i, (a, b) in enumerate(zip(got, want[r]))
                     if a != b) if len(got) == len(want[r]) else -1
            print("reader %d differs at sample %d: %s vs reference %s" %
                  (r, i, got[i:i + 3], want[r][i:i + 3]))
            return 1
    print("plan matches the reference: %d readers x %d samples" %
          (len(want), c))
    return 0


if __name__ == "__main__":
    sys.exit(main())
