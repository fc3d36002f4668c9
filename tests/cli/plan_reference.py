#!/usr/bin/env python3
"""An independent implementation of the plan, written from docs/plan.md.

Usage: plan_reference.py SOURCE PLAN_JSON

SOURCE is an index manifest, or a mixture file (each source's manifest is
then read from its index directory).  Reads it and the JSON that
`shardfs-plan --json` printed, recomputes every reader's samples (and, for
a mixture, what the epoch takes of each source) from the manifests, the
mixture and the options alone, and exits 0 when they are the same sample
for sample, 1 (with the first difference) when not.  It shares no code with
the C implementation.
"""
import json
import os
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


SCALE = 10**9


def load(path):
    """The sources as [(name, shards, weight)], shards as (joined path,
    samples, sliceable); the mixture (or None); the directory the joined
    paths are relative to (the sources' deepest common one)."""
    if os.path.basename(path) == "manifest.json":
        m = json.load(open(path))
        return [("", [(sh["path"], sh["samples"], "bounds" in sh)
                      for sh in m["shards"]], 1)], None, m.get("source")
    mix = json.load(open(path))
    here = os.path.dirname(os.path.realpath(path))
    dirs = [os.path.realpath(os.path.join(here, src["path"]))
            for src in mix["sources"]]
    root = os.path.commonpath(dirs)
    sources = []
    for src, d in zip(mix["sources"], dirs):
        index = os.path.join(here, src["index"]) if "index" in src \
            else os.path.join(d, ".shardfs")
        m = json.load(open(os.path.join(index, "manifest.json")))
        prefix = "" if d == root else os.path.relpath(d, root) + "/"
        if "choose" in src:
            w = src["choose"]
        else:
            w = int(src.get("proportion", src.get("repeat")) * SCALE + 0.5)
        sources.append((src.get("name", os.path.basename(src["path"])),
                        [(prefix + sh["path"], sh["samples"], "bounds" in sh)
                         for sh in m["shards"]], w))
    return sources, mix, root


def apportion(total, w):
    """Largest remainder, ties to the earlier."""
    W = sum(w)
    out = [total * x // W for x in w]
    rest = sorted(range(len(w)), key=lambda i: (-(total * w[i] % W), i))
    for i in rest[:total - sum(out)]:
        out[i] += 1
    return out


def allocations(sources, mix, o):
    sizes = [sum(n for _, n, _ in shards) for _, shards, _ in sources]
    kind = "proportion"
    if mix:
        kind = next(k for k in ("proportion", "repeat", "choose")
                    if k in mix["sources"][0])
    if kind == "repeat":
        w = [(n * x + SCALE // 2) // SCALE
             for n, (_, _, x) in zip(sizes, sources)]
    else:
        w = [x for _, _, x in sources]
    N = o.get("epoch_size") or (mix or {}).get("epoch_size") or \
        (sum(sizes) if kind == "proportion" else sum(w))
    return sizes, apportion(N, w)


def epoch_order(sources, mix, o):
    """The epoch's samples as (shard path, sample, source) in order."""
    sizes, alloc = allocations(sources, mix, o)
    S = len(sources)
    segments = []  # per source, its pieces in stream order
    for s, (_, shards, _) in enumerate(sources):
        seed = o["seed"] if S == 1 else \
            Prng(o["seed"], s, (1 << 64) - 1).next()
        units = []  # (path, first, count, sliceable)
        for path, n, sliceable in sorted(shards, key=lambda x: x[0].encode()):
            if n == 0:
                continue
            block = o["block"] if o["block"] and sliceable else n
            for first in range(0, n, block):
                units.append((path, first, min(block, n - first),
                              sliceable))
        n, a = sizes[s], alloc[s]
        lo = o["epoch"] * a
        if mix and mix.get("sampling") == "fixed":
            lo = 0
        pieces = []
        p = lo // n
        while a and p * n < lo + a:
            perm = list(range(len(units)))
            if o["shuffle"] != "none":
                Prng(seed, p & MASK, 0).shuffle(perm)
            at = p * n
            for u in perm:
                path, first, count, sliceable = units[u]
                x, y = max(lo, at), min(lo + a, at + count)
                if x < y:
                    inner = list(range(count))
                    if o["shuffle"] == "samples" and sliceable:
                        Prng(seed, p & MASK, u + 1).shuffle(inner)
                    pieces.append([(path, first + k, s)
                                   for k in inner[x - at:y - at]])
                at += count
            p += 1
        segments.append(pieces)
    if S == 1:
        return [x for piece in segments[0] for x in piece], alloc
    if mix.get("batching") == "stratified":
        streams = [[x for piece in pieces for x in piece]
                   for pieces in segments]
        j = [0] * S
        order = []
        for _ in range(sum(alloc)):
            # the smallest (2j + 1) / (2a), the earlier source on ties
            best = None
            for s in range(S):
                if j[s] < alloc[s] and (
                        best is None or (2 * j[s] + 1) * alloc[best] <
                        (2 * j[best] + 1) * alloc[s]):
                    best = s
            order.append(streams[best][j[best]])
            j[best] += 1
        return order, alloc
    pieces = [piece for ps in segments for piece in ps]
    if o["shuffle"] != "none":
        Prng(o["seed"], o["epoch"], (1 << 64) - 2).shuffle(pieces)
    return [x for piece in pieces for x in piece], alloc


def readers(sources, mix, o):
    """The plan's readers: one per (replica group, worker); rank r reads
    reader (r // replicas) * workers + worker; and per source what the
    epoch takes, skips, pads and drops."""
    order, alloc = epoch_order(sources, mix, o)
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
    counts = []
    for s, a in enumerate(alloc):
        skipped = sum(1 for x in order[:o["start"]] if x[2] == s)
        padding = sum(1 for x in seq[n:] if x[2] == s)
        dropped = sum(1 for x in order[o["start"] + c * t:] if x[2] == s)
        counts.append({"allocated": a, "skipped": skipped,
                       "padding": padding, "dropped": dropped})
    seq = [x[:2] for x in seq]
    if o.get("partition", "contiguous") == "contiguous":
        return [seq[r * c:(r + 1) * c] for r in range(t)], c, counts
    # interleaved: batch g goes to group g % groups at loader step
    # s = g // groups, from worker s % workers
    out = [[] for _ in range(t)]
    for g in range(c * t // b):
        s = g // groups
        reader = (g % groups) * o["workers"] + s % o["workers"]
        out[reader].extend(seq[g * b:(g + 1) * b])
    return out, c, counts


def main():
    sources, mix, _ = load(sys.argv[1])
    plan = json.load(open(sys.argv[2]))
    o = plan["options"]
    want, c, counts = readers(sources, mix, o)
    if plan["per_reader"] != c:
        print("per_reader %d, reference %d" % (plan["per_reader"], c))
        return 1
    if mix:
        got = [{k: src[k] for k in counts[0]}
               for src in plan["mixture"]["sources"]]
        if got != counts:
            print("sources: %s, reference %s" % (got, counts))
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
