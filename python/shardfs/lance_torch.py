"""Lance's PyTorch API (`lance.torch.data`, pylance) over a shardfs view.

A Lance source gives each reader a directory `MNT/<rank>/<worker>/<name>`
that is a Lance dataset of exactly its rows (docs/formats.md).  Lance's
own readers split and batch again unless told not to:

- `LanceDataset(uri, batch_size=B)` shards the dataset once more over
  torch.distributed's ranks (`auto_detect_rank=True`, its default), and
  takes B as a maximum that never spans fragments, so ranks of equal rows
  get unequal numbers of batches and an all-reduce waits for ever.
  `LanceRows` reads it with `auto_detect_rank=False` and gives rows, which
  the DataLoader batches by the mount's `batch`: every batch full, every
  rank the same number of steps.
- `SafeLanceDataset` (map-style) over a `workers=1` mount's reader
  directory has the rank's rows; `safe_loader` is Lance's
  `get_safe_loader` over it with the mount's `batch` as the batch size.

Importing this module imports torch and lance.
"""
from __future__ import annotations

import os
from typing import Any, Dict, Iterator, List, Optional, Union

import torch
from lance.torch.data import LanceDataset, SafeLanceDataset, get_safe_loader
from torch.utils.data import IterableDataset, get_worker_info

from ._mount import Mount, job_rank, job_world
from .samples import PathLike


def _mount(mount: Union[Mount, PathLike]) -> Mount:
    return mount if isinstance(mount, Mount) else Mount(mount)


def safe_dataset(mount: Union[Mount, PathLike], name: str,
                 rank: Optional[int] = None, **kwargs: Any
                 ) -> SafeLanceDataset:
    """Lance's SafeLanceDataset over rank's rows: `MNT/<rank>/0/<name>` of
    a `workers=1` mount (the DataLoader deals indices to its workers).
    `rank` defaults to the job's."""
    m = _mount(mount)
    if m.workers != 1:
        from ._mount import MountMismatch
        raise MountMismatch(
            "the mount %s is planned for workers=%d, but SafeLanceDataset is "
            "map-style (its DataLoader deals indices to its workers): "
            "remount with workers=1" % (m.path, m.workers))
    return SafeLanceDataset(os.fspath(m.reader_dir(rank, 0) / name),
                            **kwargs)


def safe_loader(mount: Union[Mount, PathLike], name: str,
                rank: Optional[int] = None, num_workers: int = 2,
                **kwargs: Any) -> torch.utils.data.DataLoader:
    """Lance's get_safe_loader (spawned, persistent workers) over
    safe_dataset(mount, name, rank), batch_size = the mount's batch: every
    rank the same number of full batches."""
    m = _mount(mount)
    return get_safe_loader(safe_dataset(m, name, rank), batch_size=m.batch,
                           num_workers=num_workers, **kwargs)


class LanceRows(IterableDataset):
    """The rows of one rank, one dict per row: DataLoader worker w reads
    `MNT/<rank>/<w>/<name>` with Lance's LanceDataset
    (`auto_detect_rank=False`: the view is split already), in order.
    Give the DataLoader batch_size = the mount's batch and num_workers =
    its workers.  `read_rows` is the LanceDataset's batch size (only how
    much it reads at once); `columns` as LanceDataset's.  The rank and
    world are taken when the dataset is made (call it after
    init_process_group) and checked against the mount in each worker."""

    def __init__(self, mount: Union[Mount, PathLike], name: str,
                 rank: Optional[int] = None, read_rows: int = 1024,
                 columns: Optional[List[str]] = None) -> None:
        super().__init__()
        self.path = os.fspath(_mount(mount).path)
        self.name = name
        self.rank = job_rank() if rank is None else rank
        self.world, self.where = job_world()
        self.read_rows = read_rows
        self.columns = columns

    def __iter__(self) -> Iterator[Dict[str, Any]]:
        info = get_worker_info()
        m = Mount(self.path)
        m._check_job(self.world, self.where,
                     info.num_workers if info else 1, None, self.rank)
        uri = m.reader_dir(self.rank, info.id if info else 0) / self.name
        ds = LanceDataset(os.fspath(uri), batch_size=self.read_rows,
                          columns=self.columns, auto_detect_rank=False,
                          to_tensor_fn=None)
        for batch in ds:
            yield from batch.to_pylist()
