"""Every Parquet recipe of docs/loaders.md, run as written there against
mounted views: each reader's rows are exactly the rows its plan names
(shardfs-plan --json), in the plan's order, for a grid of plan options."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, Dict, List, Tuple

import pytest

from helpers import plan, planned_samples, recipe, sql_recipe

OPTIONS = [
    "world=2,workers=2",
    "world=2,workers=2,block=7,shuffle=samples,seed=5",
    "world=2,workers=2,batch=4,remainder=drop",
    "world=2,workers=2,batch=3,partition=interleaved,epoch=1",
    "world=3,workers=1,block=5",
]


def rows_of(table: Any) -> List[Tuple[str, bytes]]:
    """(key, data) of every row of a pyarrow Table."""
    return list(zip(table.column("key").to_pylist(),
                    table.column("data").to_pylist()))


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Path:
    from helpers import run
    d = tmp_path_factory.mktemp("parquet")
    # row groups of up to 4 rows (mkdata): cuts fall inside them
    run("shardfs-mkdata", str(d), "--format", "parquet", "--shards", "6",
        "--samples", "5-40", "--seed", "4")
    run("shardfs-index", str(d), "--quiet")
    return d


@pytest.fixture(scope="module")
def views(source, module_mount) -> Dict[str, Tuple[Path, Dict[str, Any]]]:
    """options -> (mount point, plan)."""
    return {o: (module_mount(source, o), plan(source, o)) for o in OPTIONS}


def expected(source: Path, p: Dict[str, Any], rank: int, worker: int
             ) -> List[Tuple[str, bytes]]:
    import pyarrow.parquet as pq
    shards: Dict[str, List[Tuple[str, bytes]]] = {}
    out = []
    for shard, i in planned_samples(p, rank, worker):
        if shard not in shards:
            shards[shard] = rows_of(pq.read_table(source / shard))
        out.append(shards[shard][i])
    return out


def pyarrow_table(mnt, r, w):
    return rows_of(recipe("parquet_pyarrow").pyarrow_table(mnt, r, w))


def pyarrow_batches(mnt, r, w):
    import pyarrow as pa
    batches = list(recipe("parquet_pyarrow").pyarrow_batches(mnt, r, w))
    return rows_of(pa.Table.from_batches(batches))


def pyarrow_dataset(mnt, r, w):
    return rows_of(recipe("parquet_pyarrow").pyarrow_dataset(mnt, r, w))


def pandas_rows(engine):
    def read(mnt, r, w):
        df = recipe("parquet_pandas").pandas_frame(mnt, r, w, engine=engine)
        return list(zip(df["key"].tolist(), df["data"].tolist()))
    return read


def polars_rows(mnt, r, w):
    df = recipe("parquet_polars").polars_frame(mnt, r, w)
    return list(zip(df["key"].to_list(), df["data"].to_list()))


def hf_env(tmp: Path) -> None:
    os.environ["HF_DATASETS_OFFLINE"] = "1"
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["HF_HOME"] = str(tmp / "hf-home")


def datasets_rows(mnt, r, w, tmp):
    hf_env(tmp)
    ds = recipe("parquet_datasets").hf_dataset(mnt, r, w,
                                               cache_dir=str(tmp / "hf"))
    return list(zip(ds["key"], ds["data"]))


def datasets_stream_rows(mnt, r, w, tmp):
    hf_env(tmp)
    ds = recipe("parquet_datasets").hf_stream(mnt, r, w)
    return [(row["key"], row["data"]) for row in ds]


def duckdb_rows(mnt, r, w):
    import duckdb
    sql = sql_recipe("parquet_duckdb").replace(
        "/mnt/data/0/0/*.parquet", "%s/%d/%d/*.parquet" % (mnt, r, w))
    assert "/mnt/data" not in sql
    con = duckdb.connect()
    cur = con.execute(sql)
    names = [d[0] for d in cur.description]
    assert names == ["key", "data"]
    return [(k, None if d is None else bytes(d)) for k, d in cur.fetchall()]


READERS: Dict[str, Callable[..., List[Tuple[str, bytes]]]] = {
    "pyarrow_table": pyarrow_table,
    "pyarrow_batches": pyarrow_batches,
    "pyarrow_dataset": pyarrow_dataset,
    "pandas_pyarrow": pandas_rows("pyarrow"),
    "pandas_fastparquet": pandas_rows("fastparquet"),
    "polars": polars_rows,
    "datasets": datasets_rows,
    "datasets_streaming": datasets_stream_rows,
    "duckdb": duckdb_rows,
}


@pytest.mark.parametrize("reader", sorted(READERS))
@pytest.mark.parametrize("opts", OPTIONS)
def test_reader_rows_are_the_plan(reader, opts, views, source, tmp_path):
    mnt, p = views[opts]
    world = p["options"]["world"]
    workers = p["options"]["workers"]
    read = READERS[reader]
    for r in range(world):
        for w in range(workers):
            args = (mnt, r, w, tmp_path) if reader.startswith("datasets") \
                else (mnt, r, w)
            got = read(*args)
            want = expected(source, p, r, w)
            assert len(got) == p["per_reader"]
            assert [k for k, _ in got] == [k for k, _ in want], \
                "%s: reader %d/%d's keys" % (reader, r, w)
            assert got == want
