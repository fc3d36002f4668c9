#!/usr/bin/env python3
"""The driver of tests/bench/bench_peers.sh: shardfs against its peers.

  peers.py make DIR --kind image|small --samples N [--shards S]
      tar shards (SRC/shard-NNNNN.tar), sample = KEY.bin (bytes) + KEY.cls
      (a label); image: 8-200 KB of random bytes, small: 100-1000 bytes;
      shards cut at a byte size, so their sample counts differ, as a
      ShardWriter's do
  peers.py convert SYSTEM SRC OUT      one peer's own format, from the tars
      (mds: MosaicML Streaming MDSWriter; litdata: litdata.optimize;
      arrow: datasets.Dataset.from_generator + save_to_disk)
  peers.py job SYSTEM DATA OUT.json [--mount SHARDFS,SRC,MNT,OPTS]
      [--resume STATE] [--stop-after STEPS] [--cold [--slow]]
      one DDP-shaped job: 2 rank processes (gloo), each a DataLoader of 2
      workers, batch B, decode-free (key, bytes, label); it samples the
      PSS of every rank's process tree (and the shardfs daemons' RSS) and
      writes one JSON result line; --cold drops the page cache first,
      --slow marks a cold run whose DATA is on slow storage (bench_peers.sh
      mounts tests/bench/slowfs.c over it)
  peers.py report RESULTS.jsonl        the table, ratios to shardfs
"""
import argparse
import glob
import json
import os
import random
import signal
import subprocess
import sys
import tarfile
import io
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
WORLD, WORKERS = 2, 2
SYSTEMS = ["links", "slices", "streaming", "litdata", "wds", "hf_map",
           "hf_stream"]
LABEL = {"links": "shardfs, symlinks=1", "slices": "shardfs, symlinks=0",
         "streaming": "MosaicML Streaming (MDS)", "litdata": "LitData",
         "wds": "WebDataset", "hf_map": "datasets, map-style",
         "hf_stream": "datasets, IterableDataset"}


# ---------------------------------------------------------------- data
def make(args):
    rng = random.Random(args.seed)
    lo, hi = (8000, 200000) if args.kind == "image" else (100, 1000)
    sizes = [rng.randint(lo, hi) for _ in range(args.samples)]
    target = sum(sizes) / args.shards
    os.makedirs(args.dir, exist_ok=True)
    blob = os.urandom(hi)
    shard, fill, tar = 0, 0, None
    for i, size in enumerate(sizes):
        if tar is None:
            tar = tarfile.open(os.path.join(args.dir, "shard-%05d.tar" % shard),
                               "w", format=tarfile.USTAR_FORMAT)
        key = "s%09d" % i
        off = rng.randint(0, hi - size)
        for ext, data in (("bin", blob[off:off + size]),
                          ("cls", str(i % 1000).encode())):
            info = tarfile.TarInfo("%s.%s" % (key, ext))
            info.size = len(data)
            info.mtime = 0
            tar.addfile(info, io.BytesIO(data))
        fill += size
        if fill >= target and shard < args.shards - 1:
            tar.close()
            tar, fill, shard = None, 0, shard + 1
    tar.close()


def tar_samples(path):
    """(key, bin bytes, label) of one tar shard, in order."""
    with tarfile.open(path, "r:") as tar:
        sample = {}
        for m in tar:
            key, _, ext = m.name.partition(".")
            if sample and sample["key"] != key:
                yield sample
                sample = {}
            sample["key"] = key
            sample[ext] = tar.extractfile(m).read()
        if sample:
            yield sample


def shards(src):
    return sorted(glob.glob(os.path.join(src, "*.tar")))


def _litdata_fn(path):
    for s in tar_samples(path):
        yield {"key": s["key"], "bin": s["bin"], "cls": int(s["cls"])}


def convert(args):
    files = shards(args.src)
    if args.system == "mds":
        from streaming import MDSWriter
        cols = {"key": "str", "bin": "bytes", "cls": "int"}
        with MDSWriter(out=args.out, columns=cols, size_limit=1 << 26) as w:
            for f in files:
                for s in tar_samples(f):
                    w.write({"key": s["key"], "bin": s["bin"],
                             "cls": int(s["cls"])})
    elif args.system == "litdata":
        from litdata import optimize
        optimize(fn=_litdata_fn, inputs=files, output_dir=args.out,
                 chunk_bytes="64MB", num_workers=WORKERS)
    elif args.system == "arrow":
        import datasets
        feats = datasets.Features({"key": datasets.Value("string"),
                                   "bin": datasets.Value("binary"),
                                   "cls": datasets.Value("int64")})

        def gen(files):
            for f in files:
                for s in tar_samples(f):
                    yield {"key": s["key"], "bin": s["bin"],
                           "cls": int(s["cls"])}
        ds = datasets.Dataset.from_generator(
            gen, features=feats, gen_kwargs={"files": files},
            cache_dir=args.out + ".cache")
        ds.save_to_disk(args.out, num_shards=len(files))
        subprocess.run(["rm", "-rf", args.out + ".cache"], check=True)
    else:
        sys.exit("convert: unknown format " + args.system)


# ---------------------------------------------------------------- rank
def collate(batch):
    import torch
    if isinstance(batch[0], dict):
        keys = [s["key"] if "key" in s else s["__key__"] for s in batch]
        data = [s["bin"] for s in batch]
        labels = [int(s["cls"]) for s in batch]
    else:
        keys, data, labels = zip(*batch)
    return list(keys), list(data), torch.tensor([int(x) for x in labels])


def shardfs_decode(sample):
    return sample["__key__"], sample["bin"], sample["cls"]


def wds_decode(sample):
    return sample["__key__"], sample["bin"], sample["cls"]


def rank_loader(args, rank):
    from torch.utils.data import DataLoader
    B, s = args.batch, args.system
    state = None
    if args.resume:
        import pickle
        with open("%s.%d" % (args.resume, rank), "rb") as f:
            state = pickle.load(f)
    if s in ("links", "slices"):
        sys.path.insert(0, os.path.join(TOP, "tests", "python", "e2e"))
        # the package as `pip install ./python` gives it: the recipe then
        # reads with shardfs.samples.tar_samples, not its tarfile fallback
        sys.path.insert(0, os.path.join(TOP, "python"))
        import recipes
        ds = recipes.load("torch_tar").ShardfsTar(
            os.path.join(args.mnts[rank], str(rank)), shardfs_decode)
        return DataLoader(ds, batch_size=B, num_workers=WORKERS,
                          collate_fn=collate)
    if s == "streaming":
        from streaming import StreamingDataset, StreamingDataLoader
        ds = StreamingDataset(local=args.data, batch_size=B, shuffle=False)
        dl = StreamingDataLoader(ds, batch_size=B, num_workers=WORKERS,
                                 collate_fn=collate)
        if state is not None:
            dl.load_state_dict(state)
        return dl
    if s == "litdata":
        from litdata import StreamingDataset, StreamingDataLoader
        ds = StreamingDataset(args.data, shuffle=False)
        dl = StreamingDataLoader(ds, batch_size=B, num_workers=WORKERS,
                                 collate_fn=collate)
        if state is not None:
            dl.load_state_dict(state)
        return dl
    if s == "wds":
        import webdataset as wds
        # split_by_worker is WebDataset's default worker splitter
        ds = wds.WebDataset(shards(args.data), nodesplitter=wds.split_by_node,
                            shardshuffle=False).map(wds_decode)
        if args.wds_epoch:
            # with_epoch: every worker's iterator stops after this many
            # samples (an epoch of the job's samples / readers)
            ds = ds.with_epoch(args.wds_epoch)
        return DataLoader(ds, batch_size=B, num_workers=WORKERS,
                          collate_fn=collate)
    if s in ("hf_map", "hf_stream"):
        import datasets
        from datasets.distributed import split_dataset_by_node
        ds = datasets.load_from_disk(args.data)
        if s == "hf_stream":
            n = len(ds.data.to_batches()) if False else len(glob.glob(
                os.path.join(args.data, "*.arrow")))
            ds = ds.to_iterable_dataset(num_shards=n)
        ds = split_dataset_by_node(ds, rank=rank, world_size=WORLD)
        if state is not None:
            if s == "hf_map":  # random access: start at the sample
                from torch.utils.data import Subset
                ds = Subset(ds, range(state, len(ds)))
            else:  # no offset to seek to: skip by reading
                ds = ds.skip(state)
        return DataLoader(ds, batch_size=B, num_workers=WORKERS,
                          collate_fn=collate)
    raise SystemExit("unknown system " + s)


def run_rank(args):
    import datetime
    import torch
    import torch.distributed as dist
    rank = args.rank
    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo", init_method="file://" + args.store, rank=rank,
        world_size=WORLD, timeout=datetime.timedelta(seconds=args.timeout))
    loader = rank_loader(args, rank)
    began = time.time()
    first, steps, samples, nbytes = None, 0, 0, 0
    for keys, data, labels in loader:
        if first is None:
            first = time.time()
        steps += 1
        samples += len(keys)
        nbytes += sum(len(d) for d in data)
        if args.stop_after and steps == args.stop_after:
            break
    end = time.time()
    if args.stop_after and args.system in ("streaming", "litdata"):
        import pickle
        with open("%s.%d" % (args.save_state, rank), "wb") as f:
            pickle.dump(loader.state_dict(), f)
    if args.stop_after and args.system in ("hf_map", "hf_stream"):
        import pickle
        with open("%s.%d" % (args.save_state, rank), "wb") as f:
            pickle.dump(samples, f)
    # compare the ranks' steps after the epoch, never per step: a rank with
    # fewer steps would leave the other waiting in an all-reduce
    counts = [None] * WORLD
    dist.all_gather_object(counts, steps)
    out = {"rank": rank, "steps": steps, "samples": samples, "bytes": nbytes,
           "began": began, "first": first, "end": end, "all_steps": counts}
    with open("%s.rank%d" % (args.out, rank), "w") as f:
        json.dump(out, f)
    dist.destroy_process_group()


# ---------------------------------------------------------------- job
def pss(pid):
    """PSS of pid in KiB (0 if gone)."""
    try:
        with open("/proc/%d/smaps_rollup" % pid) as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def status(pid, field):
    """A field of /proc/PID/status in KiB (0 if gone)."""
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def rss(pid):
    return status(pid, "VmRSS")


def tree(pid):
    """pid and its descendants."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            with open("/proc/%d/task/%d/children" % (p, p)) as f:
                todo += [int(c) for c in f.read().split()]
        except OSError:
            pass
    return out


def mountpoint(path):
    return subprocess.run(["mountpoint", "-q", path]).returncode == 0


def job(args):
    if args.cold:
        subprocess.run(["sync"], check=True)
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
    t0 = time.time()
    daemons, mnts = [], []
    args.out = os.path.abspath(args.out)
    args.data = os.path.abspath(args.data)
    work = args.out + ".d"
    subprocess.run(["rm", "-rf", work], check=True)
    os.makedirs(work)
    try:
        if args.mount:
            exe, src, mnt, opts = args.mount.split(",", 3)
            for r in range(WORLD):
                m = "%s-%d" % (mnt, r)
                os.makedirs(m, exist_ok=True)
                daemons.append(subprocess.Popen(
                    [exe, src, m, "-f", "-o", "rank=%d,%s" % (r, opts)]))
                mnts.append(m)
            for m in mnts:
                while not os.path.isdir(os.path.join(m, ".shardfs")):
                    if time.time() - t0 > 30:
                        raise SystemExit("mount timed out: " + m)
                    time.sleep(0.005)
        env = dict(os.environ, WORLD_SIZE=str(WORLD),
                   LOCAL_WORLD_SIZE=str(WORLD), MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(29500 + os.getpid() % 1000),
                   HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1",
                   TOKENIZERS_PARALLELISM="false")
        cmd = [sys.executable, os.path.abspath(__file__), "rank",
               "--system", args.system, "--data", args.data,
               "--batch", str(args.batch), "--store", work + "/store",
               "--out", work + "/r", "--timeout", str(args.timeout)]
        if mnts:
            cmd += ["--mnts", ",".join(mnts)]
        for opt in ("resume", "stop_after", "save_state", "wds_epoch"):
            if getattr(args, opt):
                cmd += ["--" + opt.replace("_", "-"), str(getattr(args, opt))]
        ranks = [subprocess.Popen(cmd + ["--rank", str(r)],
                                  env=dict(env, RANK=str(r), LOCAL_RANK=str(r)),
                                  start_new_session=True)
                 for r in range(WORLD)]
        peak = [0] * WORLD
        dpeak = [0] * len(daemons)
        timed_out = False
        while any(p.poll() is None for p in ranks):
            for r, p in enumerate(ranks):
                peak[r] = max(peak[r], sum(pss(q) for q in tree(p.pid)))
            for i, d in enumerate(daemons):
                dpeak[i] = max(dpeak[i], rss(d.pid))
            if time.time() - t0 > args.timeout + 60:
                timed_out = True
                for p in ranks:
                    if p.poll() is None:
                        os.killpg(p.pid, signal.SIGKILL)
                break
            time.sleep(0.05)
        codes = [p.wait() for p in ranks]
    finally:
        for m in mnts:
            if mountpoint(m):
                subprocess.run(["fusermount3", "-u", m])
        for d in daemons:
            try:
                d.wait(timeout=30)
            except subprocess.TimeoutExpired:
                d.kill()
    # shardfs resumes by its mount's start= (bench_peers.sh gives the
    # mount; --resume names a state file only for the peers)
    resumed = bool(args.resume) or bool(args.mount and
                                        ",start=0" not in args.mount)
    res = {"system": args.system, "tag": args.tag, "cold": args.cold,
           "slow": args.slow,
           "resume": resumed, "codes": codes,
           "timed_out": timed_out, "peak_kib": peak, "daemon_kib": dpeak}
    ranks = []
    for r in range(WORLD):
        try:
            with open("%s/r.rank%d" % (work, r)) as f:
                ranks.append(json.load(f))
        except OSError:
            ranks.append(None)
    if all(ranks):
        res["steps"] = [x["steps"] for x in ranks]
        res["samples"] = [x["samples"] for x in ranks]
        res["first_s"] = max(x["first"] for x in ranks if x["first"]) - t0 \
            if all(x["first"] for x in ranks) else None
        # per-rank pace: a rank's samples over its epoch (iterator start to
        # end); the job's is the slowest rank's
        res["rate"] = [x["samples"] / (x["end"] - x["began"]) for x in ranks]
        res["epoch_s"] = max(x["end"] - x["began"] for x in ranks)
    with open(args.out, "a") as f:
        f.write(json.dumps(res) + "\n")
    subprocess.run(["rm", "-rf", work])
    print(json.dumps(res))
    return 0 if all(c == 0 for c in codes) else 1


# ---------------------------------------------------------------- report
def med(xs):
    xs = sorted(xs)
    return xs[(len(xs) - 1) // 2] if xs else None


def report(args):
    rows = [json.loads(l) for l in open(args.results) if l.strip()]
    prep = {}
    if args.prep and os.path.exists(args.prep):
        for line in open(args.prep):
            k, v = line.split()
            prep.setdefault(k, []).append(float(v))
    tags = sorted({r["tag"] for r in rows if not r["tag"].startswith("stop-")})
    for tag in tags:
        print("== %s (medians [min-max]; (ratio) = this / shardfs "
              "symlinks=1, same run)" % tag)

        def pick(system, cold=False, resume=False, slow=False):
            return [r for r in rows if r["tag"] == tag and
                    r["system"] == system and r["cold"] == cold and
                    r.get("slow", False) == slow and
                    r["resume"] == resume and "rate" in r]

        def stat(system, f, **kw):
            v = [f(r) for r in pick(system, **kw)]
            v = [x for x in v if x is not None]
            return (med(v), min(v), max(v)) if v else None

        rate = lambda r: min(r["rate"])
        mem = lambda r: max(p + (r["daemon_kib"][i] if r["daemon_kib"] else 0)
                            for i, p in enumerate(r["peak_kib"])) / 1024
        first = lambda r: r["first_s"]
        base = {k: stat("links", f, **kw) for k, f, kw in (
            ("rate", rate, {}), ("cold", rate, {"cold": True}),
            ("slow", rate, {"cold": True, "slow": True}),
            ("first", first, {}), ("mem", mem, {}),
            ("resume", first, {"resume": True}))}
        pbase = med(prep.get("%s:shardfs-index" % tag, []))
        print("| system | samples/s per rank, warm | cold | slow storage, "
              "cold | first batch s | peak PSS per rank MiB | prepare s | "
              "resume, first batch s | steps per rank |")
        print("|---|---|---|---|---|---|---|---|---|")
        pmap = {"links": "shardfs-index", "slices": "shardfs-index",
                "streaming": "mds", "litdata": "litdata", "wds": None,
                "hf_map": "arrow", "hf_stream": "arrow"}
        for s in SYSTEMS:
            if not any(pick(s, **kw) for kw in (
                    {}, {"cold": True}, {"cold": True, "slow": True})):
                continue
            cells = []
            for k, f, kw in (("rate", rate, {}), ("cold", rate, {"cold": True}),
                             ("slow", rate, {"cold": True, "slow": True}),
                             ("first", first, {}), ("mem", mem, {})):
                v = stat(s, f, **kw)
                if v is None:
                    cells.append("—")
                    continue
                b = base[k]
                r = v[0] / b[0] if b else None
                fmt = "%.0f" if k in ("rate", "cold", "slow", "mem") else \
                    "%.2f"
                cells.append((fmt % v[0]) + " [" + (fmt % v[1]) + "–" +
                             (fmt % v[2]) + "]" +
                             (" (%.2f)" % r if r and s != "links" else ""))
            p = pmap[s]
            pv = med(prep.get("%s:%s" % (tag, p), [])) if p else None
            cells.append("—" if pv is None else "%.1f%s" % (
                pv, " (%.1f)" % (pv / pbase) if pbase and
                p != "shardfs-index" else ""))
            v = stat(s, first, resume=True)
            b = base["resume"]
            cells.append("—" if v is None else "%.2f%s" % (
                v[0], " (%.2f)" % (v[0] / b[0]) if b and s != "links"
                else ""))
            steps = [tuple(r["steps"]) for kw in (
                {}, {"cold": True}, {"cold": True, "slow": True})
                for r in pick(s, **kw)]
            diffs = sorted({max(x) - min(x) for x in steps})
            cells.append("equal (%d)" % steps[0][0] if diffs == [0] else
                         "%s apart (%s)" % ("/".join(map(str, diffs)),
                                            ", ".join(map(str, steps[0]))))
            print("| %s | %s |" % (LABEL[s], " | ".join(cells)))
        bad = [r for r in rows if r["tag"] == tag and
               (r["timed_out"] or any(r["codes"]))]
        for r in bad:
            print("FAILED: %s %s codes %s timed_out %s" % (
                r["system"], "resume" if r["resume"] else "",
                r["codes"], r["timed_out"]))


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("make")
    m.add_argument("dir")
    m.add_argument("--kind", choices=["image", "small"], required=True)
    m.add_argument("--samples", type=int, required=True)
    m.add_argument("--shards", type=int, default=32)
    m.add_argument("--seed", type=int, default=1)
    c = sub.add_parser("convert")
    c.add_argument("system")
    c.add_argument("src")
    c.add_argument("out")
    for name in ("job", "rank"):
        j = sub.add_parser(name)
        j.add_argument("--system", required=True, choices=SYSTEMS)
        j.add_argument("--data", required=True)
        j.add_argument("--out", required=True)
        j.add_argument("--batch", type=int, default=32)
        j.add_argument("--timeout", type=int, default=600)
        j.add_argument("--resume")
        j.add_argument("--stop-after", type=int)
        j.add_argument("--save-state")
        j.add_argument("--wds-epoch", type=int)
        if name == "job":
            j.add_argument("--mount")
            j.add_argument("--tag", default="")
            j.add_argument("--cold", action="store_true")
            j.add_argument("--slow", action="store_true")
        else:
            j.add_argument("--rank", type=int, required=True)
            j.add_argument("--store", required=True)
            j.add_argument("--mnts")
    r = sub.add_parser("report")
    r.add_argument("results")
    r.add_argument("--prep")
    args = p.parse_args()
    if args.cmd == "rank":
        args.mnts = args.mnts.split(",") if args.mnts else None
        return run_rank(args)
    return {"make": make, "convert": convert, "job": job,
            "report": report}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main() or 0)
