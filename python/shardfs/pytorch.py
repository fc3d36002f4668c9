"""PyTorch: an IterableDataset over the current DataLoader worker's files.

Importing this module imports torch.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import (Any, Callable, Dict, Iterator, List, Optional, Tuple,
                    Union)

from torch.utils.data import IterableDataset, get_worker_info

from ._mount import Mount, ShardfsError, _torch_dist, job_rank, job_world
from .samples import PathLike, line_samples, reader_for


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
        # the running iterator's place (state_dict), and the place the
        # next iterator resumes at (load_state_dict)
        self._state: Optional[Dict[str, Any]] = None
        self._resume: Optional[Dict[str, Any]] = None

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
        worker = info.id if info else 0
        mount = Mount(self.mount.path)  # this epoch's status
        mount._check_job(world, where, info.num_workers if info else 1,
                         self.batch_size, rank)
        resume, self._resume = self._resume, None
        state: Dict[str, Any] = {"view": _view(mount), "rank": rank,
                                 "worker": worker, "samples": 0,
                                 "file": None, "in_file": 0, "offset": 0}
        if resume is not None and any(resume.get(k) != state[k] for k in
                                      ("view", "worker")):
            resume = None  # another view (a new epoch, start=): all of it
        if resume is not None and resume.get("rank") != rank:
            raise ShardfsError(
                "%s: the state to resume is rank %s's, and this is rank "
                "%d: each rank resumes from its own state (Lightning saves "
                "rank 0's DataLoader state only: give the Trainer "
                "shardfs.lightning.ShardfsEpoch, which keeps every rank's)"
                % (mount.reader_dir(rank, worker), resume.get("rank"),
                   rank))
        self._state = state
        files = mount.files(rank, worker)
        top = mount.reader_dir(rank, worker)
        skip = 0
        if resume is not None and resume["file"] is not None:
            files, skip = _resume_at(mount, rank, worker, files, top, resume)
            state["samples"] = resume["samples"]
        for path in files:
            state["file"] = os.fspath(path.relative_to(top))
            state["in_file"], state["offset"] = skip, 0
            read = self.samples or reader_for(path)
            if read is line_samples:
                # lines: resumed at the byte after the last line read
                state["offset"] = resume["offset"] if skip else 0
                samples = _lines_from(path, state["offset"], state)
            else:
                samples = read(path)
                for _ in range(skip):  # a prefix of one file, read again
                    next(samples)
            skip = 0
            for sample in samples:
                state["samples"] += 1
                state["in_file"] += 1
                yield self.transform(sample) if self.transform else sample

    def state_dict(self) -> Dict[str, Any]:
        """Where this worker's iterator is in its reader's view: the view
        (its plan options and epoch), rank, worker, samples yielded, the
        file being read, the samples of it yielded and, for line files,
        the byte after the last line.  torchdata's StatefulDataLoader
        calls it in each worker and saves it with its own state."""
        return dict(self._state) if self._state else {}

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        """Resume from state_dict(): the next iterator of this worker
        (StatefulDataLoader calls this before it) starts at the file and
        sample after the last one yielded, without opening the files
        before it (nor reading the lines before it), when the mount
        serves the same view (epoch and plan options) for the same
        worker; else it reads its view from the start (a new epoch,
        or a mount remounted with start= that already begins at the
        rest: docs/plan.md, "Resuming an epoch").  The state of another
        rank of the same view is an error (ShardfsError, raised by the
        next iterator), never a silent read from the start."""
        self._resume = dict(state) if state else None

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


def _view(mount: Mount) -> Dict[str, Any]:
    """What identifies the view a reader reads: the plan's options (the
    epoch among them), not the ranks a mount serves."""
    return {k: v for k, v in sorted(mount.options.items()) if k != "rank"}


def _resume_at(mount: Mount, rank: int, worker: int, files: List[Path],
               top: Path, resume: Dict[str, Any]) -> Tuple[List[Path], int]:
    """The files left to read after `resume` (a state_dict of the same
    view), and the samples of the first of them already read: the files
    before the one being read are dropped unopened, and that one too when
    the plan says all its samples were read."""
    names = [os.fspath(p.relative_to(top)) for p in files]
    if resume["file"] not in names:
        raise ShardfsError(
            "%s: the state to resume names %s, which the reader's view "
            "does not hold: the state is of another mount (resume on the "
            "mount it was saved on)" % (top, resume["file"]))
    i = names.index(resume["file"])
    skip = int(resume["in_file"])
    planned = [f["samples"] for r in mount.plan()["readers"]
               if (r["rank"], r["worker"]) == (rank // int(
                   mount.options.get("replicas", 1)), worker)
               for f in r["files"]]
    if len(planned) == len(files) and skip >= planned[i]:
        return files[i + 1:], 0
    return files[i:], skip


def _lines_from(path: PathLike, offset: int, state: Dict[str, Any]
                ) -> Iterator[bytes]:
    """The lines of a file from byte `offset` on, keeping in
    state["offset"] the byte after the last line given."""
    with open(path, "rb") as f:
        f.seek(offset)
        for line in f:
            offset += len(line)
            state["offset"] = offset
            yield line
