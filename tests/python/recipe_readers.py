"""Every recipe of docs/loaders.md run inside DataLoader workers (the
workers of tests/python/loaders/recipes_job.py's ranks, or of a test).

The recipes are loaded from docs/loaders.md in the worker itself (helpers
.recipe: the code a user copies), so that what runs there is the recipe,
with the worker's get_worker_info(); the datasets here only name the
mounts and the rank, and pickle as plain data for spawn and forkserver.
Every reader yields the key of each sample it reads, in order.
"""
from __future__ import annotations

import glob
import json
import os
import tarfile
from typing import Any, Callable, Dict, Iterator, List, Tuple

from torch.utils.data import Dataset, IterableDataset, get_worker_info

from helpers import recipe, sql_recipe


def hf_offline(tmp: str) -> None:
    os.environ["HF_DATASETS_OFFLINE"] = "1"
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["HF_HOME"] = os.path.join(tmp, "hf-home")


def _torch_tar(m, rank, w, tmp):
    for s in recipe("torch_tar").ShardfsTar(os.path.join(m["tar"], str(rank))):
        yield s["__key__"]


def _webdataset(m, rank, w, tmp):
    ds = recipe("webdataset").shardfs_webdataset(
        os.path.join(m["tar"], str(rank)))
    for s in ds:
        yield s["__key__"]


def _plain_python(m, rank, w, tmp):
    # docs/loaders.md "Plain Python": sorted names of the reader's files
    for path in sorted(glob.glob("%s/%d/%d/*.tar" % (m["tar"], rank, w))):
        with tarfile.open(path, "r:") as tar:
            last = None
            for member in tar:
                key = os.path.basename(member.name).partition(".")[0]
                if member.isfile() and key != last:
                    last = key
                    yield key


def _lines(m, rank, w, tmp):
    d = os.path.join(m["jsonl"], str(rank), str(w))
    for line in recipe("lines").shardfs_lines(d):
        yield json.loads(line)["key"]


def _pyarrow(fn):
    def read(m, rank, w, tmp):
        r = getattr(recipe("parquet_pyarrow"), fn)(m["parquet"], rank)
        if fn == "pyarrow_batches":
            for b in r:
                yield from b.column("key").to_pylist()
        else:
            yield from r.column("key").to_pylist()
    return read


def _pandas(engine):
    def read(m, rank, w, tmp):
        df = recipe("parquet_pandas").pandas_frame(m["parquet"], rank,
                                                   engine=engine)
        yield from df["key"].tolist()
    return read


def _polars(m, rank, w, tmp):
    yield from recipe("parquet_polars").polars_frame(
        m["parquet"], rank)["key"].to_list()


def _duckdb(m, rank, w, tmp):
    import duckdb
    sql = sql_recipe("parquet_duckdb").replace(
        "/mnt/data/0/0/*.parquet", "%s/%d/%d/*.parquet"
        % (m["parquet"], rank, w))
    for row in duckdb.connect().execute(sql).fetchall():
        yield row[0]


def _hf_stream(m, rank, w, tmp):
    hf_offline(tmp)
    for row in recipe("parquet_datasets").hf_stream(m["parquet"], rank):
        yield row["key"]


def _hf_dataset(m, rank, w, tmp):
    hf_offline(tmp)
    ds = recipe("parquet_datasets").hf_dataset(
        m["parquet"], rank, cache_dir=os.path.join(tmp, "hf-%d-%d"
                                                   % (rank, w)))
    yield from ds["key"]


def _hf_mixture(m, rank, w, tmp):
    hf_offline(tmp)
    for source, row in recipe("mixture_datasets").hf_mixture(m["mixture"],
                                                             rank):
        yield "%s:%s" % (source, row["key"])


# name -> (the mount it reads, reader)
ITERABLE: Dict[str, Tuple[str, Callable[..., Iterator[Any]]]] = {
    "torch_tar": ("tar", _torch_tar),
    "webdataset": ("tar", _webdataset),
    "plain_python": ("tar", _plain_python),
    "lines": ("jsonl", _lines),
    "pyarrow_table": ("parquet", _pyarrow("pyarrow_table")),
    "pyarrow_batches": ("parquet", _pyarrow("pyarrow_batches")),
    "pyarrow_dataset": ("parquet", _pyarrow("pyarrow_dataset")),
    "pandas_pyarrow": ("parquet", _pandas("pyarrow")),
    "pandas_fastparquet": ("parquet", _pandas("fastparquet")),
    "polars": ("parquet", _polars),
    "duckdb": ("parquet", _duckdb),
    "datasets_streaming": ("parquet", _hf_stream),
    "datasets": ("parquet", _hf_dataset),
    "mixture_datasets": ("mixture", _hf_mixture),
}


class IterableRecipes(IterableDataset):
    """In each DataLoader worker w: every iterable recipe reading rank
    `rank`'s worker w (the recipe finds w itself where it can), yielding
    (recipe, worker, key)."""

    def __init__(self, mounts: Dict[str, str], rank: int, tmp: str,
                 names: List[str]) -> None:
        self.mounts, self.rank, self.tmp = mounts, rank, tmp
        self.names = names

    def __iter__(self):
        info = get_worker_info()
        w = info.id if info else 0
        for name in self.names:
            for key in ITERABLE[name][1](self.mounts, self.rank, w, self.tmp):
                yield name, w, key


class MapRecipes(Dataset):
    """The map-style recipes over rank `rank`'s workers=1 mounts, one
    after the other: index i -> (recipe, key); each recipe's object made
    in the process that first asks for one of its samples (a worker)."""

    def __init__(self, mounts: Dict[str, str], rank: int, tmp: str,
                 lengths: Dict[str, int]) -> None:
        self.mounts, self.rank, self.tmp = mounts, rank, tmp
        self.lengths = lengths
        self.made: Dict[str, Any] = {}

    def __getstate__(self):
        state = self.__dict__.copy()
        state["made"] = {}
        return state

    def __len__(self) -> int:
        return sum(self.lengths.values())

    def _make(self, name: str) -> Any:
        if name not in self.made:
            info = get_worker_info()
            w = info.id if info else 0
            rank_dir = os.path.join(self.mounts[name], str(self.rank))
            if name == "torch_folder":
                classes = json.loads(open(os.path.join(
                    self.tmp, "classes.json")).read())
                self.made[name] = recipe("torch_folder").shardfs_image_folder(
                    rank_dir, classes, loader=lambda p: p)
            elif name == "wids":
                cache = os.path.join(self.tmp, "wids-%d-%d-%d"
                                     % (self.rank, w, os.getpid()))
                self.made[name] = recipe("wids").shardfs_wids(
                    self.mounts[name], self.rank, cache, transformations=[])
            elif name == "datasets_map":
                hf_offline(self.tmp)
                self.made[name] = recipe("parquet_datasets").hf_dataset(
                    self.mounts[name], self.rank, 0,
                    cache_dir=os.path.join(self.tmp, "hfm-%d-%d"
                                           % (self.rank, os.getpid())))
        return self.made[name]

    def __getitem__(self, i: int):
        for name in sorted(self.lengths):
            if i < self.lengths[name]:
                ds = self._make(name)
                if name == "torch_folder":
                    path, label = ds[i]
                    cls = os.path.basename(os.path.dirname(path))
                    return name, "%s/%d/%s" % (cls, label,
                                               os.path.basename(path))
                if name == "wids":
                    return name, ds[i]["__key__"]
                return name, ds[i]["key"]
            i -= self.lengths[name]
        raise IndexError(i)
