#!/usr/bin/env python3
"""The driver of tests/bench/bench_s3.sh: shardfs over an S3 bucket mounted
with s3fs, against MosaicML Streaming and LitData reading the same samples
from the same server.

  bench_s3.py make DIR --samples N --shards S
      tar shards (DIR/shard-NNNNN.tar), sample = KEY.bin (8-200 KB of
      random bytes) + KEY.cls (a label), cut at a byte size
  bench_s3.py convert mds|litdata SRC OUT --chunk-bytes B
      Streaming's MDS or LitData's chunks of the same samples, shards of
      about B bytes like the tars'
  bench_s3.py job --system links|slices|streaming|litdata --out RES.jsonl
      --proxy URL [--mount SHARDFS,SRC,MNT,OPTS] [--remote S3URL
      --cache DIR] [--tag T] [--watch PID,...]
      one DDP-shaped job of 2 epochs: 2 rank processes (gloo), each a
      DataLoader of 2 workers, batch 32, decode-free (key, bytes, label);
      shardfs mounts one view per rank (rank=R,OPTS) and serves epoch 1
      for the second; the peers read REMOTE through the proxy with their
      local cache DIR (emptied first) and iterate their loader twice.
      Rank 0 reads the proxy's counters, and the views' prefetch
      counters (.shardfs/status), at each epoch's start and end.
      CPU: each rank's user+sys with its DataLoader workers' (joined at
      the end of the epoch's iteration), plus the views' daemons and the
      processes of --watch PID,... (s3fs), read by rank 0 between the
      barriers.  Appends one JSON line per epoch to RES.jsonl.
  bench_s3.py report RES.jsonl [--index INDEX.jsonl]
      the table: medians [min-max] of the runs
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
# the tars, the peers' formats, the views' mounts and the ranks' results
# are made as tests/bench/peers/peers.py makes them (its image-like
# samples; its world of 2 ranks of 2 workers)
sys.path.insert(0, os.path.join(TOP, "tests", "bench", "peers"))
import peers  # noqa: E402

WORLD, WORKERS, EPOCHS = peers.WORLD, peers.WORKERS, 2
LABEL = {"links": "shardfs, symlinks=1", "slices": "shardfs, symlinks=0",
         "streaming": "MosaicML Streaming", "litdata": "LitData"}


# ---------------------------------------------------------------- data
def convert(args):
    files = peers.shards(args.src)
    if args.system == "mds":
        peers.write_mds(files, args.out, args.chunk_bytes)
    elif args.system == "litdata":
        peers.write_litdata(files, args.out, chunk_bytes=args.chunk_bytes)
    else:
        sys.exit("convert: unknown format " + args.system)


# ---------------------------------------------------------------- rank
def proxy_stats(url):
    with urllib.request.urlopen(url + "/__proxy/stats", timeout=30) as r:
        return json.load(r)


def own_cpu():
    """CPU seconds of this process and of its children it has reaped (the
    DataLoader's workers, joined at the end of each epoch's iteration)"""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def watched_cpu(pids):
    """CPU seconds of PIDS (the views' daemons, s3fs), 0 for one gone"""
    return sum(peers.cpu_ticks(p) for p in pids) / os.sysconf("SC_CLK_TCK")


PREFETCH = ("prefetch_files", "prefetch_bytes", "prefetch_cached_bytes")


def prefetch_counters(mnts):
    """The views' prefetch counters (.shardfs/status), summed"""
    out = dict.fromkeys(PREFETCH, 0)
    for m in mnts or []:
        with open(os.path.join(m, ".shardfs", "status")) as f:
            c = json.load(f).get("counters", {})
        for k in PREFETCH:
            out[k] += c.get(k, 0)
    return out


def collate(batch):
    import torch
    if isinstance(batch[0], dict):
        keys = [s["key"] for s in batch]
        # LitData gives memoryviews, which a worker cannot pickle
        data = [bytes(s["bin"]) for s in batch]
        labels = [int(s["cls"]) for s in batch]
    else:
        keys, data, labels = zip(*batch)
    return list(keys), list(data), torch.tensor([int(x) for x in labels])


def shardfs_decode(sample):
    return sample["__key__"], sample["bin"], sample["cls"]


def rank_loader(args, rank):
    from torch.utils.data import DataLoader
    B, s = args.batch, args.system
    if s in ("links", "slices"):
        sys.path.insert(0, os.path.join(TOP, "tests", "python", "e2e"))
        # the package as `pip install ./python` gives it: the recipe then
        # reads with shardfs.samples.tar_samples
        sys.path.insert(0, os.path.join(TOP, "python"))
        import recipes
        recipe = recipes.load("torch_tar")
        ds = recipe.ShardfsTar(os.path.join(args.mnts[rank], str(rank)),
                               shardfs_decode)
        dl = DataLoader(ds, batch_size=B, num_workers=WORKERS,
                        collate_fn=collate)
        return dl, lambda e: recipe.set_epoch(args.mnts[rank], e)
    if s == "streaming":
        from streaming import StreamingDataset, StreamingDataLoader
        ds = StreamingDataset(remote=args.remote, local=args.cache,
                              batch_size=B, shuffle=False)
        # The dataset downloaded index.json with its streams' boto3
        # clients; the loader's forked workers would inherit them and
        # their kept-alive connection, and share it: one worker reads the
        # other's response, which then waits out its 60 s read timeout
        # (or a download fails its ETag check).  Drop them, with
        # Streaming's own clean_up(), so each worker makes its own
        # (tests/mount/s3/fork_client.py shows it without Streaming).
        for stream in ds.streams:
            stream._downloader.clean_up()
        dl = StreamingDataLoader(ds, batch_size=B, num_workers=WORKERS,
                                 collate_fn=collate)
        return dl, None
    if s == "litdata":
        from litdata import StreamingDataset, StreamingDataLoader
        if args.proxy.startswith("http:"):
            # LitData fetches chunks with obstore, whose client options it
            # sets itself (replacing AWS_ALLOW_HTTP from the environment);
            # an http:// endpoint needs allow_http among them (AWS's https
            # does not).  Set before the loader forks its workers.
            from litdata.streaming import downloader
            downloader._OBSTORE_CLIENT_OPTIONS["allow_http"] = True
        ds = StreamingDataset(args.remote, cache_dir=args.cache,
                              shuffle=False,
                              storage_options={"endpoint_url": args.proxy})
        dl = StreamingDataLoader(ds, batch_size=B, num_workers=WORKERS,
                                 collate_fn=collate)
        return dl, None
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
    # the peer's import is left out of its first batch (Streaming's takes
    # seconds): a trainer pays it once, at its start, whatever it reads
    t = time.time()
    if args.system in ("streaming", "litdata"):
        __import__(args.system)
    imported = time.time() - t
    epochs = []
    loader = set_epoch = None
    for epoch in range(EPOCHS):
        dist.barrier()
        before = proxy_stats(args.proxy) if rank == 0 else None
        pf = prefetch_counters(args.mnts) if rank == 0 else None
        watched = watched_cpu(args.watch) if rank == 0 else 0
        cpu = own_cpu()
        began = time.time()
        if loader is None:  # constructing it is part of the first epoch
            loader, set_epoch = rank_loader(args, rank)
        built = time.time()
        if set_epoch:
            set_epoch(epoch)
        first, samples, nbytes = None, 0, 0
        for keys, data, labels in loader:
            if first is None:
                first = time.time()
            samples += len(keys)
            nbytes += sum(len(d) for d in data)
        end = time.time()
        # (the workers were joined as their iterator ended)
        cpu = own_cpu() - cpu
        dist.barrier()
        after = proxy_stats(args.proxy) if rank == 0 else None
        if rank == 0:
            now = prefetch_counters(args.mnts)
            pf = {k: now[k] - pf[k] for k in PREFETCH}
        if rank == 0:
            watched = watched_cpu(args.watch) - watched
        epochs.append({"epoch": epoch, "samples": samples, "bytes": nbytes,
                       "began": began, "built": built, "first": first,
                       "end": end, "import_s": imported,
                       "proxy": [before, after], "prefetch": pf,
                       "cpu_s": cpu,
                       "watched_cpu_s": watched})
    with open("%s.rank%d" % (args.out, rank), "w") as f:
        json.dump(epochs, f)
    dist.destroy_process_group()


# ---------------------------------------------------------------- job
def delta(before, after):
    """What the proxy counted between two snapshots."""
    kinds = {k: v - before["kinds"].get(k, 0)
             for k, v in after["kinds"].items()
             if v - before["kinds"].get(k, 0)}
    return {"requests": after["requests"] - before["requests"],
            "connections": after["connections"] - before["connections"],
            "bytes_down": after["bytes_down"] - before["bytes_down"],
            "kinds": kinds}


def job(args):
    t0 = time.time()
    daemons, mnts = [], []
    args.out = os.path.abspath(args.out)
    work = args.out + ".d"
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    if args.cache:
        shutil.rmtree(args.cache, ignore_errors=True)
    ready = None
    try:
        if args.mount:
            peers.mount_views(args.mount, daemons, mnts, t0, 60)
            ready = time.time() - t0
        env = dict(os.environ, WORLD_SIZE=str(WORLD),
                   LOCAL_WORLD_SIZE=str(WORLD), MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(29500 + os.getpid() % 1000),
                   TOKENIZERS_PARALLELISM="false")
        cmd = [sys.executable, os.path.abspath(__file__), "rank",
               "--system", args.system, "--out", work + "/r",
               "--store", work + "/store", "--proxy", args.proxy,
               "--batch", str(args.batch), "--timeout", str(args.timeout)]
        if mnts:
            cmd += ["--mnts", ",".join(mnts)]
        watch = [d.pid for d in daemons] + (args.watch or [])
        if watch:
            cmd += ["--watch", ",".join(map(str, watch))]
        if args.remote:
            cmd += ["--remote", args.remote, "--cache", args.cache]
        ranks = [subprocess.Popen(cmd + ["--rank", str(r)],
                                  env=dict(env, RANK=str(r),
                                           LOCAL_RANK=str(r)),
                                  start_new_session=True)
                 for r in range(WORLD)]
        codes = []
        for p in ranks:
            try:
                codes.append(p.wait(timeout=args.timeout + 60))
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, 9)
                codes.append(p.wait())
        status = []
        for m in mnts:
            with open(os.path.join(m, ".shardfs", "status")) as f:
                status.append(json.load(f).get("counters", {}))
    finally:
        peers.unmount_views(mnts, daemons)
    ranks = peers.rank_results(work)
    cache = None
    if args.cache and os.path.isdir(args.cache):
        cache = int(subprocess.run(["du", "-sb", args.cache],
                                   capture_output=True, text=True)
                    .stdout.split()[0])
    out = []
    for e in range(EPOCHS):
        res = {"system": args.system, "tag": args.tag, "epoch": e,
               "codes": codes, "load": os.getloadavg()}
        if all(ranks):
            rs = [x[e] for x in ranks]
            res["samples"] = sum(x["samples"] for x in rs)
            res["bytes"] = sum(x["bytes"] for x in rs)
            res["seconds"] = max(x["end"] for x in rs) - \
                min(x["began"] for x in rs)
            res["rate"] = res["samples"] / res["seconds"]
            # the epoch's bounds, to match a request log (PROXY_LOG)
            res["span"] = [min(x["began"] for x in rs),
                           max(x["end"] for x in rs)]
            # the first batch: the later rank's, from its epoch's start
            # (the loader's construction in the first, the mount's
            # time to ready added for shardfs)
            if all(x["first"] for x in rs):
                res["first_s"] = max(x["first"] - x["began"] for x in rs) + \
                    (ready if e == 0 and ready else 0)
                res["first_at"] = max(x["first"] for x in rs)
            res["proxy"] = delta(*ranks[0][e]["proxy"])
            if mnts:  # the views' prefetch in this epoch
                res["prefetch"] = ranks[0][e]["prefetch"]
            res["built_s"] = max(x["built"] - x["began"] for x in rs)
            res["import_s"] = max(x["import_s"] for x in rs)
            # CPU: the ranks with their workers, the daemons and s3fs
            res["cpu_s"] = sum(x["cpu_s"] for x in rs) + \
                rs[0]["watched_cpu_s"]
            res["watched_cpu_s"] = rs[0]["watched_cpu_s"]
        if e == 0 and ready is not None:
            res["mount_s"] = ready
        if e == EPOCHS - 1:
            res["cache_bytes"] = cache
            if mnts:
                res["shardfs"] = status
        out.append(res)
    with open(args.out, "a") as f:
        for res in out:
            f.write(json.dumps(res) + "\n")
    shutil.rmtree(work, ignore_errors=True)
    for res in out:
        print(json.dumps(res))
    return 0 if all(c == 0 for c in codes) and all(ranks) else 1


# ---------------------------------------------------------------- report
def med(xs):
    xs = sorted(x for x in xs if x is not None)
    return (xs[(len(xs) - 1) // 2], xs[0], xs[-1]) if xs else None


def cell(v, fmt):
    if v is None:
        return "—"
    if v[1] == v[2]:
        return fmt % v[0]
    return (fmt % v[0]) + " [" + (fmt % v[1]) + "–" + (fmt % v[2]) + "]"


def kinds(rows):
    """The request kinds of the median run (by requests), as text."""
    rows = sorted(rows, key=lambda r: r["proxy"]["requests"])
    k = rows[(len(rows) - 1) // 2]["proxy"]["kinds"]
    return ", ".join("%s %d" % (n, k[n]) for n in sorted(k))


def report(args):
    rows = [json.loads(l) for l in open(args.results) if l.strip()]
    if args.index and os.path.exists(args.index):
        idx = [json.loads(l) for l in open(args.index) if l.strip()]
        whats = {r["what"] for r in idx}
        print("shardfs-index over the bucket's mount (a fresh mount, its "
              "cache empty; median [min-max] of %d):"
              % (len(idx) // len(whats)))
        print("| run | seconds | requests | MB from the server | "
              "requests by kind |")
        print("|---|---|---|---|---|")
        for what in sorted(whats):
            rs = [r for r in idx if r["what"] == what]
            print("| `%s` | %s | %s | %s | %s |" % (
                what, cell(med([r["seconds"] for r in rs]), "%.1f"),
                cell(med([r["proxy"]["requests"] for r in rs]), "%d"),
                cell(med([r["proxy"]["bytes_down"] / 1e6 for r in rs]),
                     "%.0f"), kinds(rs)))
        print()
    systems = [s for s in LABEL if any(r["system"] == s for r in rows)]
    good = [r for r in rows if "rate" in r and not any(r["codes"])]
    print("| system | epoch | samples/s | CPU µs a sample | first batch s "
          "| requests | MB from the server | requests by kind (median run) "
          "| ratio shardfs symlinks=1 / this |")
    print("|---|---|---|---|---|---|---|---|---|")
    for e in range(EPOCHS):
        base = med([r["rate"] for r in good
                    if r["system"] == "links" and r["epoch"] == e])
        for s in systems:
            rs = [r for r in good if r["system"] == s and r["epoch"] == e]
            if not rs:
                continue
            rate = med([r["rate"] for r in rs])
            ratio = "—" if s == "links" or not base else \
                "%.2f" % (base[0] / rate[0])
            print("| %s | %d%s | %s | %s | %s | %s | %s | %s | %s |" % (
                LABEL[s], e + 1, " (cache empty)" if e == 0 else " (warm)",
                cell(rate, "%.0f"),
                cell(med([r["cpu_s"] * 1e6 / r["samples"] for r in rs
                          if r.get("cpu_s") is not None]), "%.0f"),
                cell(med([r.get("first_s") for r in rs]), "%.2f"),
                cell(med([r["proxy"]["requests"] for r in rs]), "%d"),
                cell(med([r["proxy"]["bytes_down"] / 1e6 for r in rs]),
                     "%.0f"), kinds(rs), ratio))
    for s in ("links", "slices"):
        st = [r["shardfs"] for r in rows if r["system"] == s and "shardfs" in r]
        if st:
            print()
            print("%s: the daemons' prefetch over both epochs (median run): "
                  "%s files, %s MB, %s errors" % (
                      LABEL[s],
                      *(cell(med([sum(d.get(k, 0) for d in x) / div
                                  for x in st]), "%.0f")
                        for k, div in (("prefetch_files", 1),
                                       ("prefetch_bytes", 1e6),
                                       ("prefetch_errors", 1)))))
        for e in range(EPOCHS):
            pf = [r["prefetch"] for r in good if r["system"] == s and
                  r["epoch"] == e and "prefetch" in r]
            if pf:
                print("  epoch %d: prefetch read %s MB from the source, "
                      "skipped %s MB it had cached, %s files" % (
                          e + 1, *(cell(med([x[k] / div for x in pf]),
                                        "%.0f")
                                   for k, div in (("prefetch_bytes", 1e6),
                                                  ("prefetch_cached_bytes",
                                                   1e6),
                                                  ("prefetch_files", 1)))))
    print()
    print("before the first batch (medians): the loader's construction %s; "
          "the import of its package, not counted: %s" % tuple(
              ", ".join("%s %s s" % (LABEL[s], cell(med(
                  [r[k] for r in good if r["system"] == s and
                   r["epoch"] == 0 and k in r]), "%.2f"))
                  for s in systems) for k in ("built_s", "import_s")))
    samples = sorted({r["samples"] for r in good})
    print()
    print("samples per epoch: %s; load average (1 min) at the end of the "
          "jobs: median %.1f [%.1f–%.1f]" % (
              "/".join(map(str, samples)),
              *med([r["load"][0] for r in rows])))
    failed = [r for r in rows if any(r["codes"]) or "rate" not in r]
    for r in failed:
        print("FAILED: %s epoch %d codes %s" % (r["system"], r["epoch"],
                                                r["codes"]))
    return 1 if failed else 0


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("make")
    m.add_argument("dir")
    m.add_argument("--samples", type=int, required=True)
    m.add_argument("--shards", type=int, required=True)
    m.add_argument("--seed", type=int, default=1)
    m.set_defaults(kind="image")
    c = sub.add_parser("convert")
    c.add_argument("system")
    c.add_argument("src")
    c.add_argument("out")
    c.add_argument("--chunk-bytes", type=int, required=True)
    for name in ("job", "rank"):
        j = sub.add_parser(name)
        j.add_argument("--system", required=True, choices=list(LABEL))
        j.add_argument("--out", required=True)
        j.add_argument("--proxy", required=True)
        j.add_argument("--batch", type=int, default=32)
        j.add_argument("--timeout", type=int, default=600)
        j.add_argument("--remote")
        j.add_argument("--cache")
        j.add_argument("--watch", default=[],
                       type=lambda s: [int(p) for p in s.split(",") if p])
        if name == "job":
            j.add_argument("--mount")
            j.add_argument("--tag", default="")
        else:
            j.add_argument("--rank", type=int, required=True)
            j.add_argument("--store", required=True)
            j.add_argument("--mnts", type=lambda s: s.split(","))
    r = sub.add_parser("report")
    r.add_argument("results")
    r.add_argument("--index")
    args = p.parse_args()
    if args.cmd == "make":
        peers.make(args)
    elif args.cmd == "convert":
        convert(args)
    elif args.cmd == "job":
        sys.exit(job(args))
    elif args.cmd == "rank":
        run_rank(args)
    else:
        sys.exit(report(args))


if __name__ == "__main__":
    main()
