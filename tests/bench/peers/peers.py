#!/usr/bin/env python3
"""The driver of tests/bench/bench_peers.sh: shardfs against its peers.

  peers.py make DIR --kind image|small --samples N [--shards S]
      tar shards (SRC/shard-NNNNN.tar), sample = KEY.bin (bytes) + KEY.cls
      (a label); image: 8-200 KB of random bytes, small: 100-1000 bytes;
      shards cut at a byte size, so their sample counts differ, as a
      ShardWriter's do
  peers.py convert FORMAT SRC OUT     another format, from the tars read by
      the shardfs package's tar reader (read: that pass alone; mds:
      MosaicML Streaming MDSWriter; litdata: litdata.optimize, at least 4
      chunks per reader; arrow: datasets from_generator + save_to_disk;
      jsonl, parquet: a file per tar, shardfs's and Ray Data's input;
      energon: the tars hard-linked into OUT, then `energon prepare`)
  peers.py job --system S --data DIR --out OUT.jsonl [--mount
      SHARDFS,SRC,MNT,OPTS] [--resume STATE] [--stop-after STEPS] [--cold
      [--slow [--cache]]]
      one DDP-shaped job: 2 rank processes (gloo), each a DataLoader of 2
      workers, batch B, decode-free (key, bytes, label); Ray Data: one
      driver, streaming_split(2, equal=True), a task per rank, its
      temporary directory $RAY_TMPDIR/ray (RAY_TMPDIR: the job's own
      directory when unset), removed after the job.  It samples
      the PSS of every rank's process tree (and the shardfs daemons' RSS)
      and the CPU time of every process, records every reader's sample
      count and the load average, and appends one JSON line; --cold drops
      the page cache first, --slow marks a cold run whose DATA is on slow
      storage (bench_peers.sh mounts tests/bench/slowfs.c over it),
      --cache reads it the way Streaming (remote= + local=) and LitData
      ("local:" + cache_dir) read remote data, through a cache emptied
      per job
  peers.py report RESULTS.jsonl [--prep PREP]   the tables, ratios to
      shardfs (tars, the package's reader, symlinks=1)
  peers.py readme RESULTS.jsonl [--prep PREP] [--update README.md]
      README's table (between its peers-table markers)
"""
import argparse
import glob
import json
import os
import random
import resource
import signal
import subprocess
import sys
import tarfile
import io
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
WORLD, WORKERS = 2, 2
SYSTEMS = ["links", "links_tarfile", "slices", "jsonl", "parquet", "wds",
           "wds_fast", "streaming", "litdata", "ray", "energon", "hf_map",
           "hf_stream"]
LABEL = {"links": "shardfs, symlinks=1",  # tars, the package's reader
         "links_tarfile": "shardfs, symlinks=1, tarfile",
         "slices": "shardfs, symlinks=0",
         "jsonl": "shardfs, JSONL (base64)", "parquet": "shardfs, Parquet",
         "streaming": "MosaicML Streaming (MDS)", "litdata": "LitData",
         "wds": "WebDataset, tarfile",
         "wds_fast": "WebDataset, package tar reader",
         "ray": "Ray Data (Parquet)",
         "energon": "Megatron-Energon",
         "hf_map": "datasets, map-style",
         "hf_stream": "datasets, IterableDataset"}
SHARDFS = ("links", "links_tarfile", "slices", "jsonl", "parquet")


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
    """(key, bin bytes, label) of one tar shard, in order, read by the
    shardfs package's tar reader (shardfs.samples.tar_samples): every
    converter is fed by the same fast reader, so a conversion's time is
    its writer's, not Python's tarfile's"""
    sys.path.insert(0, os.path.join(TOP, "python"))
    from shardfs.samples import tar_samples as fast
    for s in fast(path):
        yield {"key": s["__key__"], "bin": s["bin"], "cls": s["cls"]}


def shards(src):
    return sorted(glob.glob(os.path.join(src, "*.tar")))


def _litdata_fn(path):
    for s in tar_samples(path):
        yield {"key": s["key"], "bin": s["bin"], "cls": int(s["cls"])}


def write_mds(files, out, size_limit):
    """Streaming's MDS of the samples of the tars FILES, in OUT, shards of
    SIZE_LIMIT bytes at most"""
    from streaming import MDSWriter
    cols = {"key": "str", "bin": "bytes", "cls": "int"}
    with MDSWriter(out=out, columns=cols, size_limit=size_limit) as w:
        for f in files:
            for s in tar_samples(f):
                w.write({"key": s["key"], "bin": s["bin"],
                         "cls": int(s["cls"])})


def write_litdata(files, out, **chunk):
    """LitData's chunks of the samples of the tars FILES, in OUT; CHUNK:
    litdata.optimize's chunk_size= or chunk_bytes="""
    from litdata import optimize
    optimize(fn=_litdata_fn, inputs=files, output_dir=out,
             num_workers=WORKERS, **chunk)


def convert(args):
    files = shards(args.src)
    if args.system == "read":
        # the read-only pass every converter includes: printed, so a
        # reader of the results can subtract it
        n = sum(1 for f in files for _ in tar_samples(f))
        print(n)
    elif args.system == "mds":
        write_mds(files, args.out, 1 << 26)
    elif args.system == "litdata":
        # at least 4 chunks per DataLoader worker of the job: LitData
        # hands whole chunks to workers, so fewer chunks than world x
        # workers leaves a worker without data
        if not args.samples:
            sys.exit("convert litdata: give --samples N")
        per = -(-args.samples // (WORLD * WORKERS * 4))
        write_litdata(files, args.out, chunk_size=per)
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
    elif args.system == "jsonl":
        # shardfs's own input in another format: one JSONL file per tar,
        # the bytes in base64 (JSON has no bytes)
        import base64
        os.makedirs(args.out)
        for f in files:
            name = os.path.basename(f)[:-4] + ".jsonl"
            with open(os.path.join(args.out, name), "w") as o:
                for s in tar_samples(f):
                    o.write(json.dumps({
                        "key": s["key"],
                        "bin": base64.b64encode(s["bin"]).decode(),
                        "cls": int(s["cls"])}) + "\n")
    elif args.system == "parquet":
        # one Parquet file per tar (a binary column), rows in groups of
        # 1024: shardfs cuts slices at row groups, Ray reads the files
        import pyarrow as pa
        import pyarrow.parquet as pq
        os.makedirs(args.out)
        schema = pa.schema([("key", pa.string()), ("bin", pa.binary()),
                            ("cls", pa.int64())])
        for f in files:
            rows = list(tar_samples(f))
            t = pa.table({"key": [r["key"] for r in rows],
                          "bin": [r["bin"] for r in rows],
                          "cls": [int(r["cls"]) for r in rows]},
                         schema=schema)
            pq.write_table(t, os.path.join(
                args.out, os.path.basename(f)[:-4] + ".parquet"),
                row_group_size=max(16, min(1024, (8 << 20) // max(
                    1, t.nbytes // max(1, len(rows))))))
    elif args.system == "energon":
        # Energon's own preparation of the same tars: `energon prepare`
        # writes .nv-meta/ into the data directory, so the tars are
        # hard-linked into a directory of its own (shardfs-index's .shardfs/
        # and this stay apart); CrudeWebdataset: the samples reach the job's
        # cooker as they are in the tar, no sample type to map them to
        os.makedirs(args.out)
        for f in files:
            os.link(f, os.path.join(args.out, os.path.basename(f)))
        subprocess.run([os.path.join(os.path.dirname(sys.executable),
                                     "energon"), "prepare", args.out,
                        "--non-interactive", "--split-ratio", "1,0,0",
                        "--sample-type", "CrudeWebdataset", "--no-progress",
                        "--num-workers", str(WORKERS)],
                       check=True, stdout=subprocess.DEVNULL)
    else:
        sys.exit("convert: unknown format " + args.system)


# ---------------------------------------------------------------- rank
def reader_id():
    """The DataLoader worker this batch was made in (-1: the rank's own
    process)"""
    from torch.utils.data import get_worker_info
    info = get_worker_info()
    return info.id if info else -1


def collate(batch):
    import torch
    if isinstance(batch[0], dict):
        keys = [s["key"] if "key" in s else s["__key__"] for s in batch]
        data = [s["bin"] for s in batch]
        labels = [int(s["cls"]) for s in batch]
    else:
        keys, data, labels = zip(*batch)
    return (list(keys), list(data),
            torch.tensor([int(x) for x in labels]), reader_id())


def shardfs_decode(sample):
    return sample["__key__"], sample["bin"], sample["cls"]


def jsonl_decode(line):
    import base64
    r = json.loads(line)
    return r["key"], base64.b64decode(r["bin"]), r["cls"]


def parquet_decode(row):
    return row["key"], row["bin"], row["cls"]


def wds_decode(sample):
    return sample["__key__"], sample["bin"], sample["cls"]


def wds_fast_samples(src):
    """WebDataset's tarfile_to_samples stage with the shardfs package's
    tar reader: the same sample dicts"""
    sys.path.insert(0, os.path.join(TOP, "python"))
    from shardfs.samples import tar_samples as fast
    for shard in src:
        yield from fast(shard["url"])


def energon_loader(args, rank):
    """Megatron-Energon as its docs load a prepared dataset: a
    WorkerConfig of the rank (2 ranks x 2 workers), get_train_dataset with
    a task encoder, get_loader.  Decode-free like every row: a crude
    dataset (its "cookers" turn the tar's parts into a sample in the
    user's code), the encoder's decoder off, batches made by the encoder
    (Energon batches in the dataset, in the workers); one pass (repeat=
    False), no shuffle buffer, whole shard slices read in sequence
    (max_samples_per_sequence=None)"""
    import dataclasses
    from megatron.energon import (Cooker, DefaultTaskEncoder, Sample,
                                  WorkerConfig, basic_sample_keys,
                                  get_loader, get_train_dataset, stateless)

    @dataclasses.dataclass
    class BinSample(Sample):
        bin: bytes
        cls: bytes

    @stateless
    def cook(raw):
        return BinSample(**basic_sample_keys(raw), bin=raw["bin"],
                         cls=raw["cls"])

    class Encoder(DefaultTaskEncoder):
        decoder = None
        cookers = [Cooker(cook)]

        def batch(self, samples):
            return collate([(s.__key__, s.bin, s.cls) for s in samples])

    wc = WorkerConfig(rank=rank, world_size=WORLD, num_workers=WORKERS)
    ds = get_train_dataset(args.data, worker_config=wc,
                           batch_size=args.batch, shuffle_buffer_size=None,
                           max_samples_per_sequence=None, repeat=False,
                           task_encoder=Encoder())
    return get_loader(ds)


def rank_loader(args, rank):
    from torch.utils.data import DataLoader
    B, s = args.batch, args.system
    state = None
    if args.resume:
        import pickle
        with open("%s.%d" % (args.resume, rank), "rb") as f:
            state = pickle.load(f)
    if s in ("links", "links_tarfile", "slices"):
        sys.path.insert(0, os.path.join(TOP, "tests", "python", "e2e"))
        # the package as `pip install ./python` gives it: the recipe then
        # reads with shardfs.samples.tar_samples, not its tarfile fallback
        sys.path.insert(0, os.path.join(TOP, "python"))
        import recipes
        mod = recipes.load("torch_tar")
        if s == "links_tarfile":
            mod.tar_samples = None  # the recipe's tarfile loop
        ds = mod.ShardfsTar(os.path.join(args.mnts[rank], str(rank)),
                            shardfs_decode)
        return DataLoader(ds, batch_size=B, num_workers=WORKERS,
                          collate_fn=collate)
    if s in ("jsonl", "parquet"):
        sys.path.insert(0, os.path.join(TOP, "python"))
        import shardfs
        ds = shardfs.ShardfsDataset(
            args.mnts[rank], rank=rank, batch_size=B,
            transform=jsonl_decode if s == "jsonl" else parquet_decode)
        return DataLoader(ds, batch_size=B, num_workers=WORKERS,
                          collate_fn=collate)
    if s == "streaming":
        from streaming import StreamingDataset, StreamingDataLoader
        if args.cache:
            # slow storage: the documented mode for remote data, shards
            # copied to a local cache (emptied per job) and read there
            ds = StreamingDataset(remote=args.data, local=args.cache,
                                  batch_size=B, shuffle=False)
        else:
            ds = StreamingDataset(local=args.data, batch_size=B,
                                  shuffle=False)
        dl = StreamingDataLoader(ds, batch_size=B, num_workers=WORKERS,
                                 collate_fn=collate)
        if state is not None:
            dl.load_state_dict(state)
        return dl
    if s == "litdata":
        from litdata import StreamingDataset, StreamingDataLoader
        if args.cache:
            # "local:": the directory is read as a remote one, chunks
            # copied to the cache directory (emptied per job)
            ds = StreamingDataset("local:" + args.data, shuffle=False,
                                  cache_dir=args.cache)
        else:
            ds = StreamingDataset(args.data, shuffle=False)
        dl = StreamingDataLoader(ds, batch_size=B, num_workers=WORKERS,
                                 collate_fn=collate)
        if state is not None:
            dl.load_state_dict(state)
        return dl
    if s in ("wds", "wds_fast"):
        import webdataset as wds
        if s == "wds":
            # split_by_worker is WebDataset's default worker splitter
            ds = wds.WebDataset(shards(args.data),
                                nodesplitter=wds.split_by_node,
                                shardshuffle=False).map(wds_decode)
        else:
            ds = wds.DataPipeline(
                wds.SimpleShardList(shards(args.data)), wds.split_by_node,
                wds.split_by_worker, wds_fast_samples, wds.map(wds_decode))
        if args.wds_epoch:
            # with_epoch: every worker's iterator stops after this many
            # samples (an epoch of the job's samples / readers)
            ds = ds.with_epoch(args.wds_epoch)
        return DataLoader(ds, batch_size=B, num_workers=WORKERS,
                          collate_fn=collate)
    if s == "energon":
        return energon_loader(args, rank)
    if s in ("hf_map", "hf_stream"):
        import datasets
        from datasets.distributed import split_dataset_by_node
        ds = datasets.load_from_disk(args.data)
        if s == "hf_stream":
            n = len(glob.glob(os.path.join(args.data, "*.arrow")))
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


def consume(loader, stop_after=0):
    """Read a loader to its end: steps, samples, bytes, samples per
    reader, times"""
    began = time.time()
    first, steps, samples, nbytes, per = None, 0, 0, 0, {}
    for keys, data, labels, reader in loader:
        if first is None:
            first = time.time()
        steps += 1
        samples += len(keys)
        nbytes += sum(len(d) for d in data)
        per[reader] = per.get(reader, 0) + len(keys)
        if stop_after and steps == stop_after:
            break
    return {"steps": steps, "samples": samples, "bytes": nbytes,
            "readers": [per[k] for k in sorted(per)], "began": began,
            "first": first, "end": time.time()}


def ray_collate(batch):
    """iter_torch_batches' collate_fn: a dict of numpy columns"""
    import torch
    return (list(batch["key"]), list(batch["bin"]),
            torch.as_tensor(batch["cls"]), -1)


def run_ray(args):
    """Ray Data as its docs train: one driver, the dataset split with
    streaming_split(WORLD, equal=True), each split read by its own
    training worker (a Ray task here) with iter_torch_batches"""
    import ray
    # Ray's temporary directory (a session folder of logs and sockets) in
    # the job's own place, not /tmp/ray: job() sets RAY_TMPDIR and removes
    # it; _temp_dir says the same to ray.init
    ray.init(include_dashboard=False, log_to_driver=False,
             configure_logging=False,
             _temp_dir=os.path.join(os.environ["RAY_TMPDIR"], "ray"))
    files = sorted(glob.glob(os.path.join(args.data, "*.parquet")))
    ds = ray.data.read_parquet(files)
    its = ds.streaming_split(WORLD, equal=True)

    # the consumers reserve no CPU: on 2 cores, two tasks of 1 CPU would
    # leave Ray Data's read tasks none (the job never starts)
    @ray.remote(num_cpus=0)
    def train(it, rank):
        import torch
        torch.set_num_threads(1)
        return consume(it.iter_torch_batches(batch_size=args.batch,
                                             collate_fn=ray_collate))
    outs = ray.get([train.remote(it, r) for r, it in enumerate(its)])
    ray.shutdown()
    steps = [o["steps"] for o in outs]
    for r, o in enumerate(outs):
        o.update(rank=r, all_steps=steps)
        with open("%s.rank%d" % (args.out, r), "w") as f:
            json.dump(o, f)


def run_rank(args):
    import datetime
    import torch
    import torch.distributed as dist
    if args.system == "ray":
        return run_ray(args)
    rank = args.rank
    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo", init_method="file://" + args.store, rank=rank,
        world_size=WORLD, timeout=datetime.timedelta(seconds=args.timeout))
    loader = rank_loader(args, rank)
    out = consume(loader, args.stop_after)
    if args.stop_after and args.system in ("streaming", "litdata"):
        import pickle
        with open("%s.%d" % (args.save_state, rank), "wb") as f:
            pickle.dump(loader.state_dict(), f)
    if args.stop_after and args.system in ("hf_map", "hf_stream"):
        import pickle
        with open("%s.%d" % (args.save_state, rank), "wb") as f:
            pickle.dump(out["samples"], f)
    # compare the ranks' steps after the epoch, never per step: a rank with
    # fewer steps would leave the other waiting in an all-reduce
    counts = [None] * WORLD
    dist.all_gather_object(counts, out["steps"])
    out.update(rank=rank, all_steps=counts)
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


def cpu_ticks(pid):
    """utime + stime of pid in clock ticks (0 if gone)"""
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])
    except (OSError, IndexError, ValueError):
        return 0


def mountpoint(path):
    return subprocess.run(["mountpoint", "-q", path]).returncode == 0


def mount_views(spec, daemons, mnts, t0, timeout):
    """One view per rank as SPEC (SHARDFS,SRC,MNT,OPTS) says: MNT-R with
    rank=R,OPTS, each daemon added to DAEMONS and its mount point to MNTS
    as it starts (for unmount_views, however this ends); then waits until
    every view answers, until TIMEOUT s after T0 at most"""
    exe, src, mnt, opts = spec.split(",", 3)
    for r in range(WORLD):
        m = "%s-%d" % (mnt, r)
        os.makedirs(m, exist_ok=True)
        daemons.append(subprocess.Popen(
            [exe, src, m, "-f", "-o", "rank=%d,%s" % (r, opts)]))
        mnts.append(m)
    for m in mnts:
        while not os.path.isdir(os.path.join(m, ".shardfs")):
            if time.time() - t0 > timeout:
                raise SystemExit("mount timed out: " + m)
            time.sleep(0.005)


def unmount_views(mnts, daemons):
    """Unmount what mount_views mounted, and wait for its daemons"""
    for m in mnts:
        if mountpoint(m):
            subprocess.run(["fusermount3", "-u", m])
    for d in daemons:
        try:
            d.wait(timeout=30)
        except subprocess.TimeoutExpired:
            d.kill()
            d.wait()


def rank_results(work):
    """What each rank of a job wrote (WORK/r.rankR), None for a rank that
    wrote nothing"""
    ranks = []
    for r in range(WORLD):
        try:
            with open("%s/r.rank%d" % (work, r)) as f:
                ranks.append(json.load(f))
        except OSError:
            ranks.append(None)
    return ranks


def ray_tmpdir(work):
    """Where a Ray job keeps its session folder: $RAY_TMPDIR/ray
    (bench_peers.sh gives a short directory of its own), else WORK/ray.
    Ray's socket paths below it must fit AF_UNIX's 107 bytes:
    DIR/ray/session_2026-11-27_21-40-00_123456_12345/sockets/plasma_store
    is DIR and 67 bytes"""
    d = os.environ.get("RAY_TMPDIR") or work
    if len(d) + 67 > 107:
        raise SystemExit("peers.py: Ray's temporary directory %s is too "
                         "long for its sockets (at most 40 bytes): set "
                         "RAY_TMPDIR to a shorter directory" % d)
    return d


def job(args):
    if args.cold:
        subprocess.run(["sync"], check=True)
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
    load = os.getloadavg()
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    ticks = {}  # pid: the latest CPU ticks seen, of every process of the job
    t0 = time.time()
    daemons, mnts = [], []
    args.out = os.path.abspath(args.out)
    args.data = os.path.abspath(args.data)
    work = args.out + ".d"
    rtmp = ray_tmpdir(work) if args.system == "ray" else None
    subprocess.run(["rm", "-rf", work], check=True)
    os.makedirs(work)
    try:
        if args.mount:
            mount_views(args.mount, daemons, mnts, t0, 30)
        env = dict(os.environ, WORLD_SIZE=str(WORLD),
                   LOCAL_WORLD_SIZE=str(WORLD), MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(29500 + os.getpid() % 1000),
                   HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1",
                   TOKENIZERS_PARALLELISM="false")
        if rtmp:
            env["RAY_TMPDIR"] = rtmp
        cmd = [sys.executable, os.path.abspath(__file__), "rank",
               "--system", args.system, "--data", args.data,
               "--batch", str(args.batch), "--store", work + "/store",
               "--out", work + "/r", "--timeout", str(args.timeout)]
        if mnts:
            cmd += ["--mnts", ",".join(mnts)]
        if args.cache:
            cmd += ["--cache", work + "/cache"]
        for opt in ("resume", "stop_after", "save_state", "wds_epoch"):
            if getattr(args, opt):
                cmd += ["--" + opt.replace("_", "-"), str(getattr(args, opt))]
        # Ray: one driver that starts a training task per rank
        ranks = [subprocess.Popen(cmd + ["--rank", str(r)],
                                  env=dict(env, RANK=str(r), LOCAL_RANK=str(r)),
                                  start_new_session=True)
                 for r in range(1 if args.system == "ray" else WORLD)]
        peak = [0] * WORLD
        dpeak = [0] * len(daemons)
        timed_out = False
        while any(p.poll() is None for p in ranks):
            for r, p in enumerate(ranks):
                procs = tree(p.pid)
                peak[r] = max(peak[r], sum(pss(q) for q in procs))
                for q in procs:
                    ticks[q] = max(ticks.get(q, 0), cpu_ticks(q))
            for i, d in enumerate(daemons):
                dpeak[i] = max(dpeak[i], rss(d.pid))
                ticks[d.pid] = max(ticks.get(d.pid, 0), cpu_ticks(d.pid))
            if time.time() - t0 > args.timeout + 60:
                timed_out = True
                for p in ranks:
                    if p.poll() is None:
                        os.killpg(p.pid, signal.SIGKILL)
                break
            time.sleep(0.05)
        codes = [p.wait() for p in ranks]
    finally:
        unmount_views(mnts, daemons)
        if rtmp:
            subprocess.run(["rm", "-rf", "--one-file-system",
                            os.path.join(rtmp, "ray")])
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    # CPU seconds of the job: of every process the job waited for
    # (getrusage of children: ranks, their workers, the daemons), or, when
    # more, the sum over every process seen in the job's trees (what a
    # process not waited for by its parent spent, as Ray's)
    waited = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
    seen = sum(ticks.values()) / os.sysconf("SC_CLK_TCK")
    if args.system == "ray":  # one driver: its peak is the job's, halved
        peak = [peak[0] / WORLD] * WORLD
    # shardfs resumes by its mount's start= (bench_peers.sh gives the
    # mount; --resume names a state file only for the peers)
    resumed = bool(args.resume) or bool(args.mount and
                                        ",start=0" not in args.mount)
    res = {"system": args.system, "tag": args.tag, "cold": args.cold,
           "slow": args.slow, "load": load, "cpu_s": max(waited, seen),
           "cpu_waited_s": waited, "cpu_seen_s": seen,
           "resume": resumed, "codes": codes,
           "timed_out": timed_out, "peak_kib": peak, "daemon_kib": dpeak}
    ranks = rank_results(work)
    if all(ranks):
        res["steps"] = [x["steps"] for x in ranks]
        res["samples"] = [x["samples"] for x in ranks]
        res["readers"] = [x["readers"] for x in ranks]
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


PMAP = {"links": "shardfs-index", "links_tarfile": "shardfs-index",
        "slices": "shardfs-index", "jsonl": "shardfs-index-jsonl",
        "parquet": "shardfs-index-parquet", "streaming": "mds",
        "litdata": "litdata", "wds": None, "wds_fast": None,
        "ray": None, "energon": "energon", "hf_map": "arrow",
        "hf_stream": "arrow"}


def load_results(args):
    rows = [json.loads(line) for line in open(args.results) if line.strip()]
    prep = {}
    if args.prep and os.path.exists(args.prep):
        for line in open(args.prep):
            k, v = line.split()
            prep.setdefault(k, []).append(float(v))
    tags = sorted({r["tag"] for r in rows if not r["tag"].startswith("stop-")})
    return rows, prep, tags


class Set:
    """The results of one data set (tag): medians per system and mode"""

    MODES = {"warm": {}, "cold": {"cold": True},
             "slow": {"cold": True, "slow": True}}

    def __init__(self, rows, prep, tag):
        self.rows, self.prep, self.tag = rows, prep, tag
        self.n = int(tag.rsplit("-", 1)[1])

    def pick(self, system, cold=False, resume=False, slow=False):
        return [r for r in self.rows if r["tag"] == self.tag and
                r["system"] == system and r["cold"] == cold and
                r.get("slow", False) == slow and
                r["resume"] == resume and "rate" in r]

    def stat(self, system, f, **kw):
        v = [f(r) for r in self.pick(system, **kw)]
        v = [x for x in v if x is not None]
        return (med(v), min(v), max(v)) if v else None

    @staticmethod
    def rate(r):
        return min(r["rate"])

    @staticmethod
    def mem(r):
        return max(p + (r["daemon_kib"][i] if r["daemon_kib"] else 0)
                   for i, p in enumerate(r["peak_kib"])) / 1024

    @staticmethod
    def cpu(r):  # CPU microseconds per sample read, all processes
        return r["cpu_s"] * 1e6 / sum(r["samples"]) \
            if r.get("cpu_s") is not None and sum(r["samples"]) else None

    @staticmethod
    def first(r):
        return r["first_s"]

    def systems(self):
        return [s for s in SYSTEMS if any(self.pick(s, **kw)
                                          for kw in self.MODES.values())]

    def prepare(self, s):
        p = PMAP[s]
        return med(self.prep.get("%s:%s" % (self.tag, p), [])) \
            if p else None

    def readers(self, s):
        """(equal, text): every reader's sample count over the rounds"""
        seen = [r for kw in self.MODES.values() for r in self.pick(s, **kw)]
        # a map-style DataLoader hands batches to its workers in turn, so
        # its readers are the ranks (the sampler's split)
        counts = sorted({tuple((sum(x),) if s == "hf_map" else tuple(x)
                               for x in r["readers"])
                         for r in seen if "readers" in r})
        if not counts:
            return None, "—"
        flat = {c for cs in counts for rank in cs for c in rank}
        ranks = {sum(rank) for cs in counts for rank in cs}
        total = sorted({sum(sum(x) for x in cs) for cs in counts})
        readers = len(counts[0]) * len(counts[0][0])
        total = "%s of %d" % ("/".join(map(str, total)), self.n)
        if len(flat) == 1:
            return True, "equal: %d × %d = %s" % (readers, flat.pop(), total)
        detail = "; ".join(" | ".join("/".join(map(str, rank))
                                      for rank in cs) for cs in counts[:2])
        if len(ranks) == 1:
            # the ranks equal, a DataLoader's last partial batch in one
            # worker: no rank waits for another
            return True, "ranks equal (%d = %s), workers %s" % (
                ranks.pop(), total, detail)
        return False, "**UNEVEN**: %s (%s)" % (detail, total)

    def loads(self):
        v = [r["load"][0] for r in self.rows
             if r["tag"] == self.tag and "load" in r]
        return (min(v), max(v)) if v else None

    def failed(self):
        return [r for r in self.rows if r["tag"] == self.tag and
                (r["timed_out"] or any(r["codes"]) or "rate" not in r)]


def report(args):
    rows, prep, tags = load_results(args)
    for tag in tags:
        st = Set(rows, prep, tag)
        lo = st.loads()
        print("== %s: %d samples (medians [min-max] of the rounds; (ratio) ="
              " this / shardfs tar, package reader, same rounds; load "
              "average (1 min) at the jobs' starts %s)" % (
                  tag, st.n, "%.1f-%.1f" % lo if lo else "?"))
        cols = [("rate", "warm", Set.rate, "%.0f"),
                ("cold", "cold", Set.rate, "%.0f"),
                ("slow", "slow", Set.rate, "%.0f"),
                ("cpu", "warm", Set.cpu, "%.0f"),
                ("first", "warm", Set.first, "%.2f"),
                ("mem", "warm", Set.mem, "%.0f")]
        base = {k: st.stat("links", f, **Set.MODES[m])
                for k, m, f, _ in cols}
        base["resume"] = st.stat("links", Set.first, resume=True)
        pbase = st.prepare("links")
        print("| system | samples/s per rank, warm | cold | slow storage, "
              "cold | CPU µs per sample, warm | first batch s | peak PSS "
              "per rank MiB | prepare s | resume, first batch s | samples "
              "per reader |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for s in st.systems():
            cells = []
            for k, m, f, fmt in cols:
                v = st.stat(s, f, **Set.MODES[m])
                if v is None:
                    cells.append("—")
                    continue
                b = base[k]
                r = v[0] / b[0] if b and b[0] else None
                cells.append((fmt % v[0]) + " [" + (fmt % v[1]) + "–" +
                             (fmt % v[2]) + "]" +
                             (" (%.2f)" % r if r and s != "links" else ""))
            pv = st.prepare(s)
            cells.append("—" if pv is None else "%.1f%s" % (
                pv, " (%.1f)" % (pv / pbase) if pbase and
                PMAP[s] != "shardfs-index" else ""))
            v = st.stat(s, Set.first, resume=True)
            b = base["resume"]
            cells.append("—" if v is None else "%.2f%s" % (
                v[0], " (%.2f)" % (v[0] / b[0]) if b and s != "links"
                else ""))
            cells.append(st.readers(s)[1])
            print("| %s | %s |" % (LABEL[s], " | ".join(cells)))
        for r in st.failed():
            print("FAILED: %s %s%s%s codes %s timed_out %s" % (
                r["system"], "resume " if r["resume"] else "",
                "cold " if r["cold"] else "", "slow " if r["slow"] else "",
                r["codes"], r["timed_out"]))
        uneven = [s for s in st.systems() if st.readers(s)[0] is False]
        if uneven:
            print("UNEVEN: %s: readers got different sample counts"
                  % ", ".join(uneven))


def readme(args):
    """README's table: every system's medians over shardfs's (tar, the
    package reader) in the same rounds, one row per system, and the
    cells where shardfs is behind, in words"""
    rows, prep, tags = load_results(args)
    sets = [Set(rows, prep, t) for t in tags]
    name = {"image": "images", "small": "records"}
    head = ["system"]
    slow = any(r.get("slow") for r in rows)  # a column only if measured
    for st in sets:
        k = name.get(st.tag.split("-")[0], st.tag)
        head += ["%s: samples/s warm" % k] + (
            ["%s: slow storage" % k] if slow else []) + [
            "%s: CPU per sample" % k]
    both = " / ".join(name.get(st.tag.split("-")[0], st.tag) for st in sets)
    head += ["first batch, " + both, "memory per rank, " + both,
             "preparation, " + both, "every reader the same samples"]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    behind = []

    def ratio(st, s, f, mode, higher_better, what):
        v = st.stat(s, f, **Set.MODES[mode])
        b = st.stat("links", f, **Set.MODES[mode])
        if not v or not b or not b[0]:
            return "—"
        r = v[0] / b[0]
        if s not in SHARDFS and (r > 1.05 if higher_better else r < 0.95):
            behind.append("%s: %s %s (%.2f)" % (LABEL[s], name.get(
                st.tag.split("-")[0], st.tag), what, r))
        return "%.2f" % r
    for s in SYSTEMS:
        if s == "links" or not any(s in st.systems() for st in sets):
            continue
        cells = [LABEL[s]]
        for st in sets:
            cells.append(ratio(st, s, Set.rate, "warm", True,
                               "samples/s warm"))
            if slow:
                cells.append(ratio(st, s, Set.rate, "slow", True,
                                   "samples/s on slow storage"))
            cells.append(ratio(st, s, Set.cpu, "warm", False,
                               "CPU per sample"))
        for f, what in ((Set.first, "first batch"),
                        (Set.mem, "memory per rank")):
            cells.append(" / ".join(ratio(st, s, f, "warm", False, what)
                                    for st in sets))
        pv = [(st.prepare(s), st.prepare("links")) for st in sets]
        cells.append(" / ".join("%.1f×" % (a / b) if a and b else "none"
                                for a, b in pv))
        eq = [st.readers(s) for st in sets]
        cells.append(" / ".join("yes" if e[0] else "—" if e[0] is None
                                else "**no**" for e in eq))
        out.append("| " + " | ".join(cells) + " |")
    lo = [x for st in sets for x in ([st.loads()] if st.loads() else [])]
    out.append("")
    out.append("Ratios: this system's median over shardfs's (tar shards, "
               "the package's reader) in the same rounds; a rate above 1, "
               "or a time, CPU or memory below 1, is shardfs behind; "
               "preparation \"none\": the files are read as they are (Ray "
               "reads the Parquet files shardfs also serves). Sizes "
               "%s; load average %.1f–%.1f on 2 cores." % (
                   ", ".join("%s %d" % (name.get(st.tag.split("-")[0],
                                                 st.tag), st.n)
                             for st in sets),
                   min(x[0] for x in lo) if lo else 0,
                   max(x[1] for x in lo) if lo else 0))
    out.append("")
    if behind:
        out.append("Where shardfs is behind in this run: " +
                   "; ".join(behind) + ".")
    else:
        out.append("Where shardfs is behind in this run: nowhere.")
    text = "\n".join(out) + "\n"
    if args.update:
        doc = open(args.update).read()
        a, b = "<!-- peers-table: begin -->\n", "<!-- peers-table: end -->"
        i, j = doc.index(a) + len(a), doc.index(b)
        open(args.update, "w").write(doc[:i] + text + doc[j:])
    print(text, end="")


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
    c.add_argument("--samples", type=int, help="the samples in SRC")
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
        j.add_argument("--cache", action="store_true" if name == "job"
                       else "store", default=None)
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
    r = sub.add_parser("readme")
    r.add_argument("results")
    r.add_argument("--prep")
    r.add_argument("--update", help="a file whose text between the "
                   "peers-table markers is replaced")
    args = p.parse_args()
    if args.cmd == "rank":
        args.mnts = args.mnts.split(",") if args.mnts else None
        return run_rank(args)
    return {"make": make, "convert": convert, "job": job,
            "report": report, "readme": readme}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main() or 0)
