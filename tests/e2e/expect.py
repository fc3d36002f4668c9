"""What the loaders must have read, computed without shardfs: the source
shards read with Python's tarfile, the plan from
tests/plan/plan_reference.py (an independent implementation of
docs/plan.md), and a DataLoader's order (its workers' batches in turn)."""
import collections
import json
import os
import sys
import tarfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "plan"))
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
PLAN_DEFAULTS = {"world": 1, "workers": 1, "epoch": 0, "seed": 0,
                 "shuffle": "units", "block": 0, "remainder": "pad",
                 "batch": 1, "start": 0, "partition": "contiguous"}


class Source:
    def __init__(self, src):
        self.manifest = json.load(open(os.path.join(src, ".shardfs",
                                                    "manifest.json")))
        self.keys_of = {sh["path"]: sample_keys(os.path.join(src, sh["path"]))
                        for sh in self.manifest["shards"]}
        self.keys = [k for sh in sorted(self.keys_of) for k in
                     self.keys_of[sh]]

    def readers(self, options):
        """Every reader's keys under options (a dict of plan options)."""
        o = dict(PLAN_DEFAULTS, **options)
        readers, c = plan_reference.readers(self.manifest["shards"], o)
        return [[self.keys_of[p][s] for p, s in r] for r in readers], c

    def order(self, options):
        """The epoch's global order of keys."""
        o = dict(PLAN_DEFAULTS, **options)
        return [self.keys_of[p][s]
                for p, s in plan_reference.epoch_order(
                    self.manifest["shards"], o)]


def loader_batches(readers, rank, workers, batch):
    """The batches a DataLoader with `workers` workers and batch_size
    `batch` yields on `rank`: worker 0's first batch, worker 1's, ..."""
    per = []
    for w in range(workers):
        seq = readers[rank * workers + w]
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
    """reads: lists of keys read.  Every key read must be wanted, exactly
    `dropped` wanted keys unread, exactly `padding` reads repeats.
    Returns (distinct keys read, repeats)."""
    seen = collections.Counter()
    for r in reads:
        seen.update(r)
    unknown = set(seen) - set(want)
    missing = set(want) - set(seen)
    repeats = sum(seen.values()) - len(seen)
    if unknown:
        fail("%s: %d samples read that should not be, e.g. %s"
             % (what, len(unknown), sorted(unknown)[:3]))
    if len(missing) != dropped:
        fail("%s: %d samples never read, the mount reports %d dropped, "
             "e.g. %s" % (what, len(missing), dropped, sorted(missing)[:3]))
    if repeats != padding:
        fail("%s: %d samples read twice, the mount reports %d padding"
             % (what, repeats, padding))
    return len(seen), repeats
