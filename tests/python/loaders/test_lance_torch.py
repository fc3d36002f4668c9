"""Lance's PyTorch API over a view (shardfs.lance_torch): SafeLanceDataset
through Lance's get_safe_loader (map-style, 2 spawned workers, a
workers=1 mount) and LanceDataset (auto_detect_rank=False, rows batched
by the DataLoader, a workers=2 mount): every rank the same number of
full batches, and each rank's rows exactly its readers' rows in plan
order (each reader's directory read in order with lance.dataset(), which
tests/mount/test_lance.sh holds to the plan).  And why the package does
not hand LanceDataset the mount's batch: it never spans fragments, so
ranks of equal rows get unequal numbers of batches."""
from __future__ import annotations

import os
from pathlib import Path
from typing import List

import pytest

from helpers import run

NAME = "train.lance"


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Path:
    import lance
    import pyarrow as pa
    d = tmp_path_factory.mktemp("lance")
    first = 0
    # fragments of unequal sizes: cuts fall inside them
    for i, n in enumerate((37, 50, 61, 23)):
        lance.write_dataset(pa.table({
            "key": ["row%04d" % k for k in range(first, first + n)],
            "x": [float(k) for k in range(first, first + n)]}),
            str(d / NAME), mode="append" if i else "create")
        first += n
    run("shardfs-index", str(d / NAME), "--quiet")
    return d / NAME


def reader_keys(mnt: Path, rank: int, worker: int) -> List[str]:
    import lance
    ds = lance.dataset(str(mnt / str(rank) / str(worker) / NAME))
    return ds.to_table(columns=["key"]).column("key").to_pylist()


def test_safe_loader(source, mount) -> None:
    import shardfs
    from shardfs.lance_torch import safe_loader
    mnt = mount(source, "world=2,workers=1,batch=4,block=10")
    m = shardfs.Mount(mnt)
    steps = []
    for r in range(2):
        loader = safe_loader(mnt, NAME, rank=r, num_workers=2)
        batches = [b["key"] for b in loader]
        steps.append(len(batches))
        assert all(len(b) == 4 for b in batches)
        assert [k for b in batches for k in b] == reader_keys(mnt, r, 0)
        # its persistent workers are ended with the loader
        del loader
    assert steps == [m.per_reader // 4] * 2


def test_lance_rows(source, mount) -> None:
    import shardfs
    from torch.utils.data import DataLoader
    from shardfs.lance_torch import LanceRows
    mnt = mount(source, "world=2,workers=2,batch=4,block=10")
    m = shardfs.Mount(mnt)
    steps = []
    for r in range(2):
        os.environ["WORLD_SIZE"] = "2"
        try:
            ds = LanceRows(mnt, NAME, rank=r, read_rows=7)
        finally:
            del os.environ["WORLD_SIZE"]
        loader = DataLoader(ds, batch_size=4, num_workers=2,
                            multiprocessing_context="spawn")
        batches = [b["key"] for b in loader]
        steps.append(len(batches))
        assert all(len(b) == 4 for b in batches)
        per_worker = [reader_keys(mnt, r, w) for w in range(2)]
        want = []
        for i in range(0, m.per_reader, 4):  # the workers take turns
            want += per_worker[0][i:i + 4] + per_worker[1][i:i + 4]
        assert [k for b in batches for k in b] == want
    assert steps == [2 * m.per_reader // 4] * 2


def test_lance_dataset_batches_are_not_steps(source, mount, capsys) -> None:
    """LanceDataset(batch_size=4) over each reader: batches end at
    fragment ends, so their count differs from per_reader / 4."""
    import shardfs
    from lance.torch.data import LanceDataset
    mnt = mount(source, "world=2,workers=1,batch=4,block=10")
    m = shardfs.Mount(mnt)
    counts = []
    for r in range(2):
        ds = LanceDataset(str(mnt / str(r) / "0" / NAME), batch_size=4,
                          auto_detect_rank=False, to_tensor_fn=None)
        batches = list(ds)
        assert sum(b.num_rows for b in batches) == m.per_reader
        counts.append(len(batches))
    with capsys.disabled():
        print("\nLanceDataset(batch_size=4): %s batches per rank, %d "
              "full batches of rows" % (counts, m.per_reader // 4))
    assert max(counts) > m.per_reader // 4
