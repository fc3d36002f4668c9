"""What the loaders must have read, computed without shardfs: the source
shards read with Python's tarfile, the plan from
tests/cli/plan_reference.py (an independent implementation of
docs/plan.md), and a DataLoader's order (its workers' batches in turn)."""
import collections
import json
import os
import sys
import tarfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "cli"))
import plan_reference  # noqa: E402


def sample_keys(path):
    """The keys of a source shard's samples, in order: a tar's member
    names up to the first dot, a JSONL line's "key"."""
    if path.endswith(".jsonl"):
        return [json.loads(line)["key"] for line in open(path, "rb")]
    keys = []
    with tarfile.open(path) as tar:
        for m in tar:
            key = m.name.split(".", 1)[0]
            if not keys or keys[-1] != key:
                keys.append(key)
    return keys


# the plan options a mount takes when it is not told (docs/plan.md)
PLAN_DEFAULTS = {"world": 1, "workers": 1, "replicas": 1, "epoch": 0,
                 "seed": 0, "shuffle": "units", "block": 0,
                 "remainder": "pad", "batch": 1, "start": 0,
                 "epoch_size": 0, "partition": "contiguous"}


class Source:
    """A source directory or a mixture file, its samples named by key."""

    def __init__(self, src):
        if os.path.isdir(src):
            src = os.path.join(src, ".shardfs", "manifest.json")
        self.sources, self.mix, root = plan_reference.load(src)
        self.keys_of = {path: sample_keys(os.path.join(root, path))
                        for _, shards, _ in self.sources
                        for path, _, _ in shards}
        self.keys = [k for sh in sorted(self.keys_of) for k in
                     self.keys_of[sh]]
        # a mixture's sources by name, and the source of every key
        self.names = [name for name, _, _ in self.sources]
        self.source_of = {k: name for name, shards, _ in self.sources
                          for path, _, _ in shards
                          for k in self.keys_of[path]}

    def readers(self, options):
        """Every reader's keys under options (a dict of plan options)."""
        o = dict(PLAN_DEFAULTS, **options)
        readers, c, _ = plan_reference.readers(self.sources, self.mix, o)
        return [[self.keys_of[p][s] for p, s in r] for r in readers], c

    def per_source(self, options):
        """What an epoch reads of each source: allocated - skipped -
        dropped + padding, by source name."""
        o = dict(PLAN_DEFAULTS, **options)
        _, _, counts = plan_reference.readers(self.sources, self.mix, o)
        return {name: x["allocated"] - x["skipped"] - x["dropped"] +
                x["padding"] for name, x in zip(self.names, counts)}

    def order(self, options):
        """The epoch's global order of keys."""
        o = dict(PLAN_DEFAULTS, **options)
        order, _ = plan_reference.epoch_order(self.sources, self.mix, o)
        return [self.keys_of[p][s] for p, s, _ in order]


def loader_batches(readers, rank, workers, batch, replicas=1):
    """The batches a DataLoader with `workers` workers and batch_size
    `batch` yields on `rank`: worker 0's first batch, worker 1's, ...
    (ranks of one replica group read one group's readers)"""
    per = []
    for w in range(workers):
        seq = readers[rank // replicas * workers + w]
        per.append([seq[i:i + batch] for i in range(0, len(seq), batch)])
    out = []
    for i in range(max(len(p) for p in per)):
        out.extend(p[i] for p in per if i < len(p))
    return out


failures = []


def fail(msg):
    """A finding: printed now, counted by finish()."""
    failures.append(msg)
    print("FAIL: " + msg)


def finish():
    """The exit status: 1 with a count of the findings, else 0."""
    if failures:
        print("%d findings" % len(failures))
        return 1
    return 0


def check_union(what, reads, want, padding, dropped):
    """reads: lists of keys read; want: the keys of the epoch's order (a
    key may be there several times: a mixture's up-sampled source).  Every
    key read must be wanted, exactly `dropped` wanted reads missing,
    exactly `padding` reads beyond what is wanted.  Returns (distinct keys
    read, reads beyond the wanted)."""
    seen = collections.Counter()
    for r in reads:
        seen.update(r)
    wanted = collections.Counter(want)
    unknown = set(seen) - set(wanted)
    missing = sorted((wanted - seen).elements())
    repeats = sum(max(0, seen[k] - wanted[k]) for k in wanted)
    if unknown:
        fail("%s: %d samples read that should not be, e.g. %s"
             % (what, len(unknown), sorted(unknown)[:3]))
    if len(missing) != dropped:
        fail("%s: %d samples never read, the mount reports %d dropped, "
             "e.g. %s" % (what, len(missing), dropped, missing[:3]))
    if repeats != padding:
        fail("%s: %d samples read twice, the mount reports %d padding"
             % (what, repeats, padding))
    return len(seen), repeats
