#!/usr/bin/env python3
"""Check what the ranks of a ddp.py job trained on.

  check_ddp.py job SRC OUT OPTIONS EPOCHS MNT...
      every epoch: each rank ran workers x per_reader / batch steps; each
      rank's batches are exactly what the plan (plan_reference.py) and a
      DataLoader's worker order give; all ranks together saw the dataset
      once plus only the padding the mounts report (pad) or minus only
      the dropped samples they report (drop); consecutive epochs differ.
  check_ddp.py elastic SRC OUT_A OPTIONS_A STEPS OUT_B OPTIONS_B EPOCH
      job A stopped after STEPS steps, job B resumed the epoch: A read
      exactly the first STEPS x world x batch samples of the epoch, and
      A and B together read every sample of the epoch once (plus B's
      padding).

OPTIONS are the mount's plan options (key=value,...).  Prints one line
per finding and a summary; exits 1 on any finding.
"""
import collections
import glob
import json
import os
import sys

from expect import (PLAN_DEFAULTS, Source, check_union, fail, finish,
                    loader_batches)


def parse(options):
    o = dict(PLAN_DEFAULTS)
    for kv in options.split(","):
        k, v = kv.split("=")
        o[k] = v if k in ("shuffle", "remainder", "partition") else int(v)
    return o


def rank_logs(out):
    logs = {}
    for path in glob.glob(os.path.join(out, "rank-*.json")):
        rank = int(os.path.basename(path)[5:-5])
        logs[rank] = json.load(open(path))
    return logs


def check_epoch(source, o, epoch, logs, status):
    o = dict(o, epoch=epoch)
    readers, c = source.readers(o)
    world, workers, batch = o["world"], o["workers"], o["batch"]
    steps = workers * c // batch
    reads = []
    for rank in range(world):
        got = logs[rank][str(epoch)]["batches"]
        if len(got) != steps:
            fail("epoch %d rank %d ran %d steps, want %d"
                 % (epoch, rank, len(got), steps))
        want = loader_batches(readers, rank, workers, batch,
                              o["replicas"])
        if got != want:
            i = next((i for i, (a, b) in enumerate(zip(got, want))
                      if a != b), min(len(got), len(want)))
            fail("epoch %d rank %d batch %d is %s, the plan says %s"
                 % (epoch, rank, i, got[i:i + 1], want[i:i + 1]))
        reads.extend(got)
    # with replicas, every group's ranks read the same batches: judge
    # one rank per group
    if o["replicas"] > 1:
        for rank in range(world):
            if logs[rank][str(epoch)]["batches"] != \
                    logs[rank - rank % o["replicas"]][str(epoch)]["batches"]:
                fail("epoch %d rank %d read other batches than rank %d of "
                     "its replica group" % (epoch, rank,
                                            rank - rank % o["replicas"]))
        reads = [b for rank in range(0, world, o["replicas"])
                 for b in logs[rank][str(epoch)]["batches"]]
    # the samples after start=, each once, plus the padding or minus the
    # drop the mounts report
    remaining = source.order(o)[o["start"]:]
    n = len(remaining)
    distinct, extra = check_union("epoch %d" % epoch, reads, remaining,
                                  status["padding"], status["dropped"])
    if source.mix:
        got = collections.Counter(source.source_of[k] for b in reads
                                  for k in b)
        want_src = source.per_source(o)
        if dict(got) != {k: v for k, v in want_src.items() if v}:
            fail("epoch %d: samples per source %s, the plan's %s"
                 % (epoch, dict(sorted(got.items())),
                    dict(sorted(want_src.items()))))
        print("epoch %d: per source %s" % (epoch, " ".join(
            "%s=%d" % (k, got[k]) for k in source.names)))
    total = sum(len(b) for b in reads)
    print("epoch %d: %d ranks x %d steps of %d; %d distinct samples of %d "
          "remaining, %d padding, %d dropped" % (epoch, world, steps, batch,
                                                 distinct, n, extra,
                                                 n + extra - total))
    return [logs[r][str(epoch)]["batches"] for r in range(world)]


def job(src, out, options, epochs, mounts):
    source = Source(src)
    o = parse(options)
    logs = rank_logs(out)
    if sorted(logs) != list(range(o["world"])):
        fail("logs of ranks %s, want 0..%d" % (sorted(logs), o["world"] - 1))
        return
    status = json.load(open(os.path.join(mounts[0], ".shardfs",
                                         "status")))["plan"]
    for m in mounts[1:]:
        other = json.load(open(os.path.join(m, ".shardfs", "status")))["plan"]
        if (other["padding"], other["dropped"]) != (status["padding"],
                                                    status["dropped"]):
            fail("%s reports other padding/drop than %s" % (m, mounts[0]))
    previous = None
    for epoch in epochs:
        batches = check_epoch(source, o, epoch, logs, status)
        if previous is not None and batches == previous:
            fail("epoch %d has the order of the epoch before" % epoch)
        previous = batches


def elastic(src, out_a, options_a, steps, out_b, options_b, epoch):
    source = Source(src)
    a, b = parse(options_a), parse(options_b)
    logs_a, logs_b = rank_logs(out_a), rank_logs(out_b)
    order = source.order(dict(a, epoch=epoch))
    consumed = steps * a["world"] * a["batch"]
    read_a = collections.Counter(
        k for r in logs_a for batch in logs_a[r][str(epoch)]["batches"]
        for k in batch)
    if sorted(read_a) != sorted(order[:consumed]) or \
            sum(read_a.values()) != consumed:
        fail("job A did not read exactly the first %d samples of the epoch"
             % consumed)
    read_b = collections.Counter(
        k for r in logs_b for batch in logs_b[r][str(epoch)]["batches"]
        for k in batch)
    readers, c = source.readers(dict(b, epoch=epoch))
    padding = c * len(readers) - (len(order) - b["start"])
    both = read_a + read_b
    missing = set(order) - set(both)
    twice = sum(both.values()) - len(both)
    if missing:
        fail("%d samples of the epoch read by neither job, e.g. %s"
             % (len(missing), sorted(missing)[:3]))
    if twice != padding:
        fail("%d samples read twice; job B's padding is %d"
             % (twice, padding))
    if set(read_a) & set(read_b):
        fail("job B read again samples that job A had read")
    print("elastic: job A (world=%d) read %d samples in %d steps, job B "
          "(world=%d, start=%d) read %d (%d padding): %d of %d samples "
          "once" % (a["world"], sum(read_a.values()), steps, b["world"],
                    b["start"], sum(read_b.values()), padding,
                    len(both), len(order)))


def main():
    mode, args = sys.argv[1], sys.argv[2:]
    if mode == "job":
        job(args[0], args[1], args[2], [int(e) for e in args[3].split(",")],
            args[4:])
    else:
        elastic(args[0], args[1], args[2], int(args[3]), args[4], args[5],
                int(args[6]))
    return finish()


if __name__ == "__main__":
    sys.exit(main())
