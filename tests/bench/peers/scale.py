#!/usr/bin/env python3
"""The driver of tests/bench/bench_peers_scale.sh: preparation and start-up
of shardfs and its peers at 1 M - 10 M small samples.

Every system gets the same samples, made by one deterministic generator
(never through tar files): sample i is

    key  "s%010d" % i        (a str, 11 bytes)
    bin  32 random bytes      (seeded per block of BLOCK samples)
    cls  an int in [0, 1000)  (from the first two bytes of bin)

  scale.py gen N                   run the generator alone, print seconds
  scale.py jsonl DIR N             JSONL shards of BLOCK samples for
                                   shardfs: {"key": .., "bin": HEX, "cls": ..}
  scale.py convert SYSTEM OUT N    a peer's own writer fed by the generator
                                   (mds: MDSWriter; litdata: optimize;
                                   arrow: from_generator + save_to_disk)
  scale.py record WHAT TIME WALL --n N [--system S --dir DIR]
                                   a preparation's JSON line (TIME: the
                                   output of /usr/bin/time -v)
  scale.py start SYSTEM DATA OUT.jsonl [--mount SHARDFS,MNT]
                                   start-up of rank 0 of world=2: one rank
                                   process, a DataLoader of 2 workers, batch
                                   256, BATCHES batches, then stop; appends
                                   a JSON line (first batch s, peak PSS of the
                                   rank's process tree, the daemon's peak RSS)
  scale.py load SYSTEM DATA        one process: the index loaded alone (RSS
                                   growth and seconds), printed as JSON
  scale.py partition N             Streaming's partition of N samples alone
                                   (no data: its memory at 100 M)
  scale.py report RESULTS.jsonl    the markdown tables, ratios to shardfs
"""
import argparse
import glob
import json
import os
import random
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
sys.path.insert(0, HERE)
from peers import (collate, med, mountpoint, pss, rss,  # noqa: E402
                   status, tree)

BLOCK = 100_000          # samples per JSONL shard and per generator block
PAYLOAD = 32             # random bytes a sample
WORLD, WORKERS, BATCH, BATCHES = 2, 2, 256, 10
SYSTEMS = ["shardfs", "streaming", "litdata", "hf"]
LABEL = {"shardfs": "shardfs (JSONL)", "streaming": "MosaicML Streaming (MDS)",
         "litdata": "LitData", "hf": "datasets (Arrow, map-style)"}
PREP = {"shardfs": "shardfs-index", "streaming": "mds", "litdata": "litdata",
        "hf": "arrow"}


# ---------------------------------------------------------------- samples
def blocks(n):
    return range((n + BLOCK - 1) // BLOCK)


def block(b, n, seed=1):
    """The samples of block b of an n-sample set, as dicts."""
    lo, hi = b * BLOCK, min(n, (b + 1) * BLOCK)
    blob = random.Random(seed * 1_000_003 + b).randbytes(PAYLOAD * (hi - lo))
    for j, i in enumerate(range(lo, hi)):
        data = blob[j * PAYLOAD:(j + 1) * PAYLOAD]
        yield {"key": "s%010d" % i, "bin": data,
               "cls": (data[0] | data[1] << 8) % 1000}


def samples(n):
    for b in blocks(n):
        yield from block(b, n)


def gen(args):
    t = time.time()
    count = sum(1 for _ in samples(args.n))
    print("%.3f" % (time.time() - t))
    assert count == args.n


def jsonl(args):
    os.makedirs(args.dir, exist_ok=True)
    for b in blocks(args.n):
        with open(os.path.join(args.dir, "shard-%05d.jsonl" % b), "w") as f:
            f.writelines('{"key": "%s", "bin": "%s", "cls": %d}\n' % (
                s["key"], s["bin"].hex(), s["cls"]) for s in block(b, args.n))


def _litdata_block(spec):
    b, n = spec
    yield from block(b, n)


def convert(args):
    n = args.n
    if args.system == "mds":
        from streaming import MDSWriter
        cols = {"key": "str", "bin": "bytes", "cls": "int"}
        with MDSWriter(out=args.out, columns=cols, size_limit=1 << 26) as w:
            for s in samples(n):
                w.write(s)
    elif args.system == "litdata":
        from litdata import optimize
        optimize(fn=_litdata_block, inputs=[(b, n) for b in blocks(n)],
                 output_dir=args.out, chunk_bytes="64MB", num_workers=WORKERS)
    elif args.system == "arrow":
        import datasets
        feats = datasets.Features({"key": datasets.Value("string"),
                                   "bin": datasets.Value("binary"),
                                   "cls": datasets.Value("int64")})
        ds = datasets.Dataset.from_generator(
            samples, features=feats, gen_kwargs={"n": n},
            cache_dir=args.out + ".cache")
        ds.save_to_disk(args.out)
        subprocess.run(["rm", "-rf", args.out + ".cache"], check=True)
    else:
        sys.exit("convert: unknown format " + args.system)


def record(args):
    """One preparation's JSON line: its wall time, its peak RSS from
    /usr/bin/time -v (the largest single process: a parent's or one
    waited-for child's, never their sum), the load average, and the bytes
    of the metadata SYSTEM reads to start and of everything else."""
    with open(args.time) as f:
        kib = next(int(x.split(":")[1]) for x in f
                   if "Maximum resident set size" in x)
    out = {"kind": "prep", "n": args.n, "what": args.what,
           "wall_s": round(args.wall, 3), "maxrss_kib": kib,
           "load1": os.getloadavg()[0]}
    if args.dir:
        names = {"shardfs": [".shardfs"], "streaming": ["index.json"],
                 "litdata": ["index.json"],
                 "hf": ["state.json", "dataset_info.json"]}[args.system]
        out["meta"] = sum(size(os.path.join(args.dir, x)) for x in names)
        out["data"] = size(args.dir) - out["meta"]
        out["samples"] = count(args.system, args.dir)
    print(json.dumps(out))


def count(system, path):
    """The samples SYSTEM's own metadata says PATH holds (a conversion
    that lost some shows here, before any reader fails)."""
    if system == "shardfs":
        with open(os.path.join(path, ".shardfs", "manifest.json")) as f:
            return json.load(f)["samples"]
    if system == "streaming":
        with open(os.path.join(path, "index.json")) as f:
            return sum(s["samples"] for s in json.load(f)["shards"])
    if system == "litdata":
        with open(os.path.join(path, "index.json")) as f:
            chunks = json.load(f)["chunks"]
        # LitData finds a chunk by its file name: two entries with one
        # name are one chunk, the other lost
        sizes = {c["filename"]: c["chunk_size"] for c in chunks}
        return sum(sizes.values())
    import datasets
    return len(datasets.load_from_disk(path))


def size(path):
    if os.path.isfile(path):
        return os.path.getsize(path)
    return sum(os.path.getsize(os.path.join(d, f))
               for d, _, fs in os.walk(path) for f in fs)


# ---------------------------------------------------------------- rank 0
def shardfs_sample(line):
    s = json.loads(line)
    return s["key"], bytes.fromhex(s["bin"]), s["cls"]


def dataset(system, data):
    """Rank 0 of world=2's dataset for SYSTEM, and its DataLoader class."""
    from torch.utils.data import DataLoader
    if system == "shardfs":
        sys.path.insert(0, os.path.join(TOP, "python"))
        from shardfs.pytorch import ShardfsDataset
        return ShardfsDataset(data, transform=shardfs_sample,
                              batch_size=BATCH), DataLoader
    if system == "streaming":
        # no process group: Streaming's World reads RANK, WORLD_SIZE,
        # LOCAL_RANK and LOCAL_WORLD_SIZE (streaming/base/distributed.py);
        # the driver sets LOCAL_WORLD_SIZE=1 (rank 0 alone on its node), so
        # no barrier waits on a rank 1 that is not started
        import streaming.base.dataset
        from streaming import StreamingDataset, StreamingDataLoader
        # ... but with WORLD_SIZE > 1 and no process group, Streaming makes
        # one itself (maybe_init_dist: env://, every rank) and waits for all
        # ranks at a barrier before it returns; rank 0 alone would wait for
        # ever, so it is told not to: Streaming's own work for rank 0, without
        # a gloo rendezvous the other systems do not need
        streaming.base.dataset.maybe_init_dist = lambda: False
        return StreamingDataset(local=data, batch_size=BATCH,
                                shuffle=False), StreamingDataLoader
    if system == "litdata":
        # LitData takes its world from torch.distributed only
        # (litdata/utilities/env.py, _DistributedEnv.detect): without a
        # process group it is world 1, so rank 0 of 2 is set on the dataset
        from litdata import StreamingDataset, StreamingDataLoader
        from litdata.utilities.env import _DistributedEnv
        ds = StreamingDataset(data, shuffle=False, drop_last=True)
        ds.distributed_env = _DistributedEnv(world_size=WORLD, global_rank=0,
                                             num_nodes=1)
        return ds, StreamingDataLoader
    if system == "hf":
        import datasets
        from datasets.distributed import split_dataset_by_node
        ds = datasets.load_from_disk(data)
        return split_dataset_by_node(ds, rank=0, world_size=WORLD), DataLoader
    raise SystemExit("unknown system " + system)


def run_rank(args):
    import torch
    torch.set_num_threads(1)
    began = time.time()
    ds, loader_class = dataset(args.system, args.data)
    built = time.time()
    loader = loader_class(ds, batch_size=BATCH, num_workers=WORKERS,
                          collate_fn=collate)
    first, steps, count = None, 0, 0
    for keys, data, labels in loader:
        if first is None:
            first = time.time()
        steps += 1
        count += len(keys)
        assert len(data[0]) == PAYLOAD
        if steps == BATCHES:
            break
    end = time.time()
    del loader  # its workers stopped here, as a job that ends its epoch
    with open(args.out, "w") as f:
        json.dump({"began": began, "built": built, "first": first, "end": end,
                   "steps": steps, "samples": count}, f)


def start(args):
    """Time from before the mount (shardfs) or the rank's process start
    (peers) to rank 0's first batch; peak PSS of the rank's process tree;
    for shardfs also the daemon's peak RSS (VmHWM)."""
    env = dict(os.environ, RANK="0", WORLD_SIZE=str(WORLD), LOCAL_RANK="0",
               LOCAL_WORLD_SIZE="1", HF_HUB_OFFLINE="1",
               HF_DATASETS_OFFLINE="1")
    out = os.path.abspath(args.results) + ".rank"
    data, daemon, mnt = os.path.abspath(args.data), None, None
    t0 = time.time()
    try:
        if args.mount:
            exe, mnt = args.mount.split(",")
            daemon = subprocess.Popen(
                [exe, data, mnt, "-f", "-o",
                 "world=%d,workers=%d,batch=%d,rank=0" % (WORLD, WORKERS,
                                                          BATCH)])
            while not os.path.isdir(os.path.join(mnt, ".shardfs")):
                if daemon.poll() is not None or time.time() - t0 > 60:
                    raise SystemExit("mount failed: " + mnt)
                time.sleep(0.002)
            ready = time.time() - t0
            data = mnt
        rank = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "rank", args.system,
             data, out], env=env, start_new_session=True)
        peak, dpeak = 0, 0
        while rank.poll() is None:
            peak = max(peak, sum(pss(q) for q in tree(rank.pid)))
            if daemon:
                dpeak = max(dpeak, rss(daemon.pid))
            if time.time() - t0 > args.timeout:
                os.killpg(rank.pid, 9)
            time.sleep(0.02)
        if daemon:
            dpeak = max(dpeak, hwm(daemon.pid))
        code = rank.wait()
    finally:
        if mnt and mountpoint(mnt):
            subprocess.run(["fusermount3", "-u", mnt])
        if daemon:
            daemon.wait(timeout=60)
    res = {"system": args.system, "n": args.n, "code": code,
           "peak_kib": peak, "daemon_kib": dpeak}
    if daemon:
        res["ready_s"] = ready
    if code == 0:
        with open(out) as f:
            r = json.load(f)
        # began: the rank's imports done; built: its dataset made
        res.update(first_s=r["first"] - t0, began_s=r["began"] - t0,
                   built_s=r["built"] - t0, steps=r["steps"],
                   samples=r["samples"])
        os.unlink(out)
    with open(args.results, "a") as f:
        f.write(json.dumps(res) + "\n")
    print(json.dumps(res))
    return code


def hwm(pid):
    return status(pid, "VmHWM")


def load(args):
    """The index alone, in this process: what grows with samples."""
    import torch  # noqa: F401  (imported before the baseline, as in a job)
    import streaming  # noqa: F401
    import litdata  # noqa: F401
    import datasets  # noqa: F401
    me = os.getpid()
    before, anon, t = rss(me), status(me, "RssAnon"), time.time()
    os.environ.update(RANK="0", WORLD_SIZE=str(WORLD), LOCAL_RANK="0",
                      LOCAL_WORLD_SIZE="1")
    ds, _ = dataset(args.system, args.data)
    n = len(ds)  # LitData reads its index.json here
    print(json.dumps({"system": args.system, "n": args.n, "len": n,
                      "load_s": time.time() - t,
                      # the heap it grew by (what a larger index needs),
                      # and its RSS, mapped data files' pages included
                      "load_kib": status(me, "RssAnon") - anon,
                      "load_rss_kib": rss(me) - before}))


def partition(args):
    """What Streaming's local leader computes before a rank's first sample,
    without any data: the partition of N samples over world=2 (one rank a
    node), 2 workers, batch 256 (get_partitions, as generate_work calls it
    with shuffle off).  Its peak heap grows with N."""
    import numpy  # noqa: F401  (in the baseline)
    from streaming.base.partition import get_partitions
    me = os.getpid()
    before, t = rss(me), time.time()
    ids = get_partitions("relaxed", args.n, num_canonical_nodes=WORLD,
                         num_physical_nodes=WORLD, ranks_per_node=1,
                         workers_per_rank=WORKERS, batch_size=BATCH)
    print(json.dumps({"system": "streaming", "n": args.n,
                      "partition_s": round(time.time() - t, 3),
                      "partition_peak_kib": status(me, "VmHWM") - before,
                      "ids_kib": ids.nbytes // 1024}))


# ---------------------------------------------------------------- report
def size_text(n):
    """Bytes as a reader takes them in: 401 MB, 3.3 KB."""
    for unit, div in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if n >= div:
            return "%.3g %s" % (n / div, unit)
    return "%d B" % n


def secs(x):
    return "%.2f" % x if x < 10 else "%.1f" % x


def report(args):
    rows = [json.loads(x) for x in open(args.results) if x.strip()]
    for n in sorted({r["n"] for r in rows}):
        rs = [r for r in rows if r["n"] == n]
        prep = {r["what"]: r for r in rs if r.get("kind") == "prep"}
        loads = {r["system"]: r for r in rs if "load_kib" in r}
        gen_s = prep["generator"]["wall_s"] if "generator" in prep else 0
        print("\n== %d samples (ratio) = this / shardfs, same run" % n)
        print("\nPreparation (one run each; the generator alone: %.1f s; "
              "writing the JSONL shardfs indexes: %.1f s, not part of "
              "shardfs's preparation)\n" % (
                  gen_s, prep.get("jsonl", {}).get("wall_s", 0)))
        print("| system | prepare s | writer's own s (− generator) | "
              "peak RSS MB | metadata | data | samples | "
              "load average |")
        print("|---|---|---|---|---|---|---|---|")
        base = prep.get("shardfs-index", {}).get("wall_s")
        for what in ("shardfs-index", "shardfs-index --no-hash", "mds",
                     "litdata", "arrow"):
            p = prep.get(what)
            if not p:
                continue
            own = p["wall_s"] if what.startswith("shardfs") else \
                p["wall_s"] - gen_s / (WORKERS if what == "litdata" else 1)
            ratio = " (%.1f)" % (p["wall_s"] / base) if base and \
                what != "shardfs-index" else ""
            got = p.get("samples")
            print("| %s | %s%s | %s | %.0f | %s | %s | %s | %.1f |" % (
                what, secs(p["wall_s"]), ratio, secs(own),
                p["maxrss_kib"] / 1024, size_text(p.get("meta", 0)),
                size_text(p.get("data", 0)),
                "—" if got is None else "all" if got == n else
                "**%d of %d**" % (got, n), p["load1"]))
        print("\nStart-up, rank 0 of world=2, 2 workers, batch 256, %d "
              "batches (medians [min–max])\n" % BATCHES)
        print("| system | first batch s | dataset made s | peak PSS, rank "
              "tree MB | daemon peak RSS MB | index load alone: heap MB, "
              "RSS MB, s | runs |")
        print("|---|---|---|---|---|---|---|")

        def stat(system, f):
            v = [f(r) for r in rs if r.get("system") == system and
                 "first_s" in r]
            return (med(v), min(v), max(v)) if v else None
        b_first = stat("shardfs", lambda r: r["first_s"])
        b_mem = stat("shardfs", lambda r: (r["peak_kib"] + r["daemon_kib"]))
        for s in SYSTEMS:
            first = stat(s, lambda r: r["first_s"])
            mem = stat(s, lambda r: r["peak_kib"])
            tot = stat(s, lambda r: r["peak_kib"] + r["daemon_kib"])
            dmn = stat(s, lambda r: r["daemon_kib"])
            runs = [r for r in rs if r.get("system") == s and "code" in r]
            fails = sum(1 for r in runs if r["code"] != 0)
            if not runs:
                continue
            cells = []
            if first:
                rf = " (%.2f)" % (first[0] / b_first[0]) \
                    if b_first and s != "shardfs" else ""
                rm = " (%.2f)" % (tot[0] / b_mem[0]) \
                    if b_mem and s != "shardfs" else ""
                made = stat(s, lambda r: r["built_s"])
                cells += ["%.2f [%.2f–%.2f]%s" % (first + (rf,)),
                          "%.2f" % made[0],
                          "%.0f [%.0f–%.0f]%s" % (
                              mem[0] / 1024, mem[1] / 1024, mem[2] / 1024, rm)]
                cells.append("%.0f" % (dmn[0] / 1024) if s == "shardfs"
                             else "—")
            else:
                cells += ["failed", "—", "—", "—"]
            ld = loads.get(s)
            cells.append("%.0f, %.0f, %.2f" % (
                ld["load_kib"] / 1024, ld["load_rss_kib"] / 1024,
                ld["load_s"]) if ld else "—")
            cells.append("%d%s" % (len(runs), ", %d failed" % fails
                                   if fails else ""))
            print("| %s | %s |" % (LABEL[s], " | ".join(cells)))
        for r in rs:
            if "partition_s" in r:
                print("\nStreaming's partition alone (no data), %d samples: "
                      "%.2f s, peak heap %.0f MB (its sample ids %.0f MB)"
                      % (r["n"], r["partition_s"],
                         r["partition_peak_kib"] / 1024, r["ids_kib"] / 1024))
        print("\nWriter's own: the conversion less the generator's time "
              "(LitData's generator runs in its 2 workers: less half of "
              "it). Memory ratio: the rank tree's peak PSS, plus for "
              "shardfs its daemon's peak RSS. Dataset made: from the start "
              "to the rank holding its dataset (the mount, torch and the "
              "library imported, the index read).")


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("gen").add_argument("n", type=int)
    j = sub.add_parser("jsonl")
    j.add_argument("dir")
    j.add_argument("n", type=int)
    c = sub.add_parser("convert")
    c.add_argument("system", choices=["mds", "litdata", "arrow"])
    c.add_argument("out")
    c.add_argument("n", type=int)
    m = sub.add_parser("record")
    m.add_argument("what")
    m.add_argument("time")
    m.add_argument("wall", type=float)
    m.add_argument("--n", type=int, required=True)
    m.add_argument("--system", choices=SYSTEMS)
    m.add_argument("--dir")
    r = sub.add_parser("rank")
    r.add_argument("system", choices=SYSTEMS)
    r.add_argument("data")
    r.add_argument("out")
    s = sub.add_parser("start")
    s.add_argument("system", choices=SYSTEMS)
    s.add_argument("data")
    s.add_argument("results")
    s.add_argument("--n", type=int, required=True)
    s.add_argument("--mount")
    s.add_argument("--timeout", type=int, default=600)
    ld = sub.add_parser("load")
    ld.add_argument("system", choices=SYSTEMS[1:])
    ld.add_argument("data")
    ld.add_argument("--n", type=int, required=True)
    pa = sub.add_parser("partition")
    pa.add_argument("n", type=int)
    sub.add_parser("report").add_argument("results")
    args = p.parse_args()
    return {"gen": gen, "jsonl": jsonl, "convert": convert, "record": record,
            "rank": run_rank, "start": start, "load": load,
            "partition": partition,
            "report": report}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main() or 0)
