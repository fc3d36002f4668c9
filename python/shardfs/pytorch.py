"""PyTorch: an IterableDataset over the current DataLoader worker's files.

Importing this module imports torch.
"""
from __future__ import annotations

import os
from typing import Any, Callable, Dict, Iterator, Optional, Tuple, Union

from torch.utils.data import IterableDataset, get_worker_info

from ._mount import Mount, _torch_dist, job_rank, job_world
from .samples import PathLike, reader_for


class ShardfsDataset(IterableDataset):
    """The samples of one rank of a shardfs mount, read by each DataLoader
    worker from `MNT/<rank>/<worker>/` in the plan's order.

    `mount` is a Mount or its path; `rank` defaults to the job's
    (torch.distributed, else RANK, else 0) and the world size is the
    job's (torch.distributed, else WORLD_SIZE, else 1).  A DataLoader
    worker started by spawn or forkserver (Linux's default from Python
    3.14) has no process group, nor, under torch.multiprocessing.spawn, a
    RANK or WORLD_SIZE: the dataset sent to it takes them from the
    process that starts it, whose torch.distributed is initialised by
    then (a copy sent before, e.g. to start a rank, takes nothing).
    `samples(path)` reads one file's samples (default: by extension,
    shardfs.samples); `transform` maps each sample.  `batch_size`, when
    given, is checked against the mount's `batch`.  Each iteration starts
    with Mount.check_job (world, num_workers, batch, rank: MountMismatch
    naming every difference) and lists the worker's directory then, so an
    epoch switched before the iterator starts is the one read.  Do not
    wrap it in a DistributedSampler, and give the DataLoader num_workers =
    the mount's `workers` (0 for a workers=1 mount)."""

    def __init__(self, mount: Union[Mount, PathLike],
                 rank: Optional[int] = None,
                 samples: Optional[Callable[[PathLike], Iterator[Any]]] = None,
                 transform: Optional[Callable[[Any], Any]] = None,
                 batch_size: Optional[int] = None) -> None:
        super().__init__()
        self.mount = mount if isinstance(mount, Mount) else Mount(mount)
        self.rank = rank
        self.samples = samples
        self.transform = transform
        self.batch_size = batch_size
        # the job's rank, world and where the world was found, once taken
        # for a worker that cannot find them
        self._job: Optional[Tuple[int, int, str]] = None

    def __getstate__(self) -> Dict[str, Any]:
        """What a worker started by spawn or forkserver gets: the job's
        rank and world are taken now, in the process that starts it,
        when its torch.distributed is initialised (not yet when a rank
        is being started: that rank takes them for its own workers)."""
        state = self.__dict__.copy()
        if state["_job"] is None and _torch_dist() is not None:
            state["_job"] = (job_rank(),) + job_world()
        return state

    def __iter__(self) -> Iterator[Any]:
        info = get_worker_info()
        rank, world, where = self._job or (job_rank(),) + job_world()
        if self.rank is not None:
            rank = self.rank
        mount = Mount(self.mount.path)  # this epoch's status
        mount._check_job(world, where, info.num_workers if info else 1,
                         self.batch_size, rank)
        for path in mount.files(rank, info.id if info else 0):
            read = self.samples or reader_for(path)
            for sample in read(path):
                yield self.transform(sample) if self.transform else sample

    def __len__(self) -> int:
        """Samples of this rank per epoch: per_reader x workers (what
        len(DataLoader) needs with batch_size=None is the caller's)."""
        return self.mount.per_reader * self.mount.workers


def worker_files(mount: Union[Mount, PathLike], rank: Optional[int] = None
                 ) -> list:
    """The current DataLoader worker's files (os.fspath strings), for a
    loader that takes a file list (WebDataset, pyarrow...).  Called in a
    worker started with spawn or forkserver, give it the rank taken in
    the main process: the worker may not know the job's."""
    m = mount if isinstance(mount, Mount) else Mount(mount)
    return [os.fspath(p) for p in m.files(rank)]
