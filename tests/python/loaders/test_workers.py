"""Every recipe of docs/loaders.md read inside DataLoader workers.

First the case that lost data: `datasets` deals the files of a streaming
dataset among DataLoader workers again, so a recipe that loads a
reader's files with `load_dataset(..., streaming=True)` and iterates them
inside worker w kept only the files `datasets` gives worker w (a world=1,
workers=2 mount of 4 JSONL shards of 20: 40 rows of 80).  Then every
recipe (PyTorch tar IterableDataset, WebDataset, plain Python, lines,
pyarrow, pandas with both engines, polars, DuckDB, `datasets` map-style
and streaming, the `datasets` mixture recipe, and the map-style ImageFolder,
wids and `datasets` ones) in a DDP job of 2 ranks (gloo) x 2 DataLoader
workers started by fork, forkserver and spawn: each reader's keys are
exactly its plan's (shardfs-plan --json), in order, and both ranks take
the same number of steps.  The mounts are made once for the module; one
job per start method runs every recipe (one DataLoader of iterable
recipes, one of map-style ones)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any, Dict, List

import pytest

from helpers import plan, planned_samples, recipe, run

JOB = Path(__file__).with_name("recipes_job.py")


def tar_keys(path: Path) -> List[str]:
    keys: List[str] = []
    with tarfile.open(path, "r:") as tar:
        for m in tar:
            k = os.path.basename(m.name).partition(".")[0]
            if m.isfile() and (not keys or keys[-1] != k):
                keys.append(k)
    return keys


def shard_keys(src: Path, shard: str, cache: Dict[str, List[str]]
               ) -> List[str]:
    if shard not in cache:
        path = src / shard
        if shard.endswith(".tar"):
            cache[shard] = tar_keys(path)
        elif shard.endswith(".jsonl"):
            cache[shard] = [json.loads(ln)["key"]
                            for ln in path.read_text().splitlines()]
        else:
            import pyarrow.parquet as pq
            cache[shard] = pq.read_table(path).column("key").to_pylist()
    return cache[shard]


def planned_keys(src: Path, p: Dict[str, Any], rank: int, worker: int,
                 cache: Dict[str, List[str]], mixture: bool = False
                 ) -> List[str]:
    out = []
    for shard, i in planned_samples(p, rank, worker):
        key = shard_keys(src, shard, cache)[i]
        out.append("%s:%s" % (shard.split("/")[0], key) if mixture else key)
    return out


def _torch_dataset(mnt: str, how: str) -> Any:
    from torch.utils.data import IterableDataset

    class Rows(IterableDataset):
        def __iter__(self):
            if how == "mixture_datasets":
                for _, row in recipe("mixture_datasets").hf_mixture(mnt, 0):
                    yield row["key"]
            else:
                for row in recipe("parquet_datasets").hf_stream(mnt, 0):
                    yield row["key"]
    return Rows()


@pytest.mark.parametrize("how,fmt", [("mixture_datasets", "jsonl"),
                                     ("parquet_datasets", "parquet")])
def test_datasets_recipe_in_two_workers_reads_every_row(how, fmt, data,
                                                        mount, tmp_path):
    from torch.utils.data import DataLoader
    from recipe_readers import hf_offline
    hf_offline(str(tmp_path))
    src = data(fmt, 4, "20", seed=3)
    opts = "world=1,workers=2"
    mnt = mount(src, opts)
    p = plan(src, opts)
    got = list(DataLoader(_torch_dataset(str(mnt), how), batch_size=None,
                          num_workers=2))
    cache: Dict[str, List[str]] = {}
    # the DataLoader takes from its workers in turn
    want = [k for pair in zip(planned_keys(src, p, 0, 0, cache),
                              planned_keys(src, p, 0, 1, cache))
            for k in pair]
    assert len(got) == 80
    assert got == want


MOUNTS = {  # name -> (source, options)
    "tar": ("tar", "world=2,workers=2,batch=4,block=7"),
    "jsonl": ("jsonl", "world=2,workers=2,batch=4,block=9"),
    "parquet": ("parquet", "world=2,workers=2,batch=4,block=7"),
    "mixture": ("mix.json", "world=2,workers=2,block=8"),
    "wids": ("tar", "world=2,workers=1,block=7"),
    "datasets_map": ("parquet", "world=2,workers=1,batch=4,block=5"),
    "torch_folder": ("files", "world=2,workers=1"),
}


@pytest.fixture(scope="module")
def world(tmp_path_factory, module_mount) -> Dict[str, Any]:
    d = tmp_path_factory.mktemp("recipes")
    for fmt, shards, samples, seed in (("tar", 5, "6-30", 1),
                                       ("jsonl", 5, "6-30", 2),
                                       ("parquet", 5, "6-30", 3),
                                       ("files", 4, "5-12", 4)):
        run("shardfs-mkdata", str(d / fmt), "--format", fmt, "--shards",
            str(shards), "--samples", samples, "--seed", str(seed))
        run("shardfs-index", str(d / fmt), "--quiet",
            *(["--format", "files"] if fmt == "files" else []))
    (d / "mix.json").write_text(json.dumps(
        {"sources": [{"path": "jsonl", "proportion": 3},
                     {"path": "parquet", "proportion": 1}],
         "epoch_size": 120}))
    out: Dict[str, Any] = {"dir": d, "mounts": {}, "plans": {}}
    for name, (src, opts) in MOUNTS.items():
        out["mounts"][name] = str(module_mount(d / src, opts))
        out["plans"][name] = plan(d / src, opts)
    return out


def expected(world: Dict[str, Any], name: str, rank: int, worker: int,
             cache: Dict[str, List[str]]) -> List[str]:
    src, _ = MOUNTS[name]
    d = world["dir"]
    if name == "mixture":
        return planned_keys(d, world["plans"][name], rank, worker, cache,
                            mixture=True)
    return planned_keys(d / src, world["plans"][name], rank, worker, cache)


def folder_keys(world: Dict[str, Any], rank: int) -> List[str]:
    """The .jpg files of rank's view of the files mount, as the
    ImageFolder reader names them (class/label/name), sorted."""
    classes = sorted(os.listdir(world["dir"] / "files"))
    top = Path(world["mounts"]["torch_folder"]) / str(rank) / "0"
    return sorted("%s/%d/%s" % (c.name, classes.index(c.name), f.name)
                  for c in top.iterdir() for f in c.iterdir()
                  if f.name.endswith(".jpg"))


ITERABLE = ["torch_tar", "webdataset", "plain_python", "lines",
            "pyarrow_table", "pyarrow_batches", "pyarrow_dataset",
            "pandas_pyarrow", "pandas_fastparquet", "polars", "duckdb",
            "datasets_streaming", "datasets", "mixture_datasets"]


@pytest.mark.parametrize("context", ["fork", "forkserver", "spawn"])
def test_every_recipe_in_ddp_workers(context, world, tmp_path) -> None:
    from recipe_readers import ITERABLE as READERS
    classes = sorted(os.listdir(world["dir"] / "files"))
    (tmp_path / "classes.json").write_text(json.dumps(classes))
    lengths = {n: world["plans"][n]["per_reader"]
               for n in ("wids", "datasets_map")}
    lengths["torch_folder"] = len(folder_keys(world, 0))
    assert lengths["torch_folder"] == len(folder_keys(world, 1))
    cfg = {"tmp": str(tmp_path), "iterable": ITERABLE,
           "iterable_mounts": {k: world["mounts"][k]
                               for k in ("tar", "jsonl", "parquet",
                                         "mixture")},
           "map_mounts": {k: world["mounts"][k]
                          for k in ("wids", "datasets_map",
                                    "torch_folder")},
           "map": lengths}
    assert sorted(READERS) == sorted(ITERABLE)
    config = tmp_path / "config.json"
    config.write_text(json.dumps(cfg))
    store = tempfile.mkdtemp(dir=tmp_path) + "/store"
    env = dict(os.environ, DDP_STORE=store)
    procs = [subprocess.Popen([sys.executable, str(JOB), str(config),
                               str(tmp_path), context, str(r), "2"],
                              env=env, stderr=subprocess.PIPE, text=True)
             for r in range(2)]
    errs = []
    for p in procs:
        try:
            errs.append(p.communicate(timeout=400)[1])
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            raise AssertionError("the recipes job did not end in 400 s")
    assert [p.returncode for p in procs] == [0, 0], \
        "\n".join(e[-4000:] for e in errs)
    cache: Dict[str, List[str]] = {}
    steps = []
    for r in range(2):
        got = json.loads((tmp_path / ("rank%d.json" % r)).read_text())
        steps.append(got["steps"])
        for name in ITERABLE:
            mount = READERS[name][0]
            for w in range(2):
                want = expected(world, mount, r, w, cache)
                assert len(want) == world["plans"][mount]["per_reader"]
                assert got["iterable"][name][w] == want, (context, name, r,
                                                          w)
        for name in ("wids", "datasets_map"):
            assert got["map"][name] == expected(world, name, r, 0, cache), \
                (context, name, r)
        assert sorted(got["map"]["torch_folder"]) == folder_keys(world, r)
    assert steps[0] == steps[1] and steps[0][0] == steps[0][1], steps
