"""A mounted shardfs view, as the running job sees it.

Everything here reads the mount's control files (`.shardfs/status`,
`.shardfs/epoch`, `.shardfs/plan.json`) and lists its directories: the plan
itself is computed by the daemon, never here.  Only the standard library is
imported; torch is consulted only when the caller has imported it already
(a job that never imported torch.distributed has not initialised it).
"""
from __future__ import annotations

import errno
import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence


class ShardfsError(Exception):
    """A shardfs mount could not be used: the message says what, where and
    what to do."""


class MountMismatch(ShardfsError):
    """The running job does not match the mount it reads (world size,
    DataLoader workers, batch size, or a rank the mount does not serve)."""


def _ranges(ranks: Sequence[int]) -> str:
    """[0, 1, 2, 5] -> "0-2,5": the way the rank= option writes them."""
    out: List[str] = []
    i = 0
    while i < len(ranks):
        j = i
        while j + 1 < len(ranks) and ranks[j + 1] == ranks[j] + 1:
            j += 1
        out.append(str(ranks[i]) if i == j else "%d-%d" % (ranks[i], ranks[j]))
        i = j + 1
    return ",".join(out)


def _torch_dist() -> Any:
    """torch.distributed when the process imported it and initialised a
    process group, else None."""
    dist = sys.modules.get("torch.distributed")
    if dist is None:
        return None
    try:
        if dist.is_available() and dist.is_initialized():
            return dist
    except Exception:  # a half-imported torch: treat as not distributed
        return None
    return None


def _worker_info() -> Any:
    """torch.utils.data.get_worker_info() inside a DataLoader worker, else
    None (also when torch was never imported)."""
    data = sys.modules.get("torch.utils.data")
    if data is None:
        return None
    return data.get_worker_info()


def job_rank() -> int:
    """The rank of this process: torch.distributed's when it is
    initialised, else the environment's RANK, else 0."""
    dist = _torch_dist()
    if dist is not None:
        return int(dist.get_rank())
    env = os.environ.get("RANK")
    if env is not None:
        try:
            return int(env)
        except ValueError:
            raise ShardfsError("RANK=%r in the environment is not a number: "
                               "set it to this process's rank" % env) from None
    return 0


def job_world() -> "tuple[int, str]":
    """The world size of the running job and where it was found:
    torch.distributed, WORLD_SIZE, or 1 (a job that is not distributed)."""
    dist = _torch_dist()
    if dist is not None:
        return int(dist.get_world_size()), "torch.distributed"
    env = os.environ.get("WORLD_SIZE")
    if env is not None:
        try:
            return int(env), "WORLD_SIZE"
        except ValueError:
            raise ShardfsError("WORLD_SIZE=%r in the environment is not a "
                               "number: set it to the job's world size"
                               % env) from None
    return 1, "not distributed"


def resume_start(steps: int, world: int, batch: int, start: int = 0) -> int:
    """The `start=` that resumes an epoch of a `partition=interleaved`
    mount after `steps` batches per rank of a job of `world` ranks with
    batch size `batch` (the stopped job's own values), which itself began
    at `start`: start + steps x world x batch samples of the epoch's order
    were read (docs/plan.md, "Resuming an epoch")."""
    for name, v in (("steps", steps), ("world", world), ("batch", batch),
                    ("start", start)):
        if not isinstance(v, int) or v < 0 or (v == 0 and name in
                                               ("world", "batch")):
            raise ValueError("resume_start: %s=%r must be a %s integer"
                             % (name, v, "positive" if name in
                                ("world", "batch") else "non-negative"))
    return start + steps * world * batch


class Mount:
    """A mounted shardfs view at `path` (the mount point, `MNT`).

    Attributes, from `.shardfs/status` when the object is made (and again
    after `refresh()` or `set_epoch()`): `world`, `workers`, `batch`,
    `per_reader` (samples of every reader this epoch), `ranks` (the ranks
    this mount serves: all of them unless mounted with `rank=`), `options`
    (every plan option), `status` (the whole status document).  `epoch`
    is read from `.shardfs/epoch` each time.
    """

    path: Path
    status: Dict[str, Any]
    options: Dict[str, Any]
    world: int
    workers: int
    batch: int
    per_reader: int
    ranks: List[int]

    def __init__(self, path: "str | os.PathLike[str]") -> None:
        self.path = Path(path)
        self.refresh()

    def __repr__(self) -> str:
        return ("shardfs.Mount(%r: world=%d, workers=%d, batch=%d, ranks=%s, "
                "per_reader=%d)" % (str(self.path), self.world, self.workers,
                                    self.batch, _ranges(self.ranks),
                                    self.per_reader))

    # -- reading the control files -------------------------------------

    def _control(self, name: str) -> Path:
        return self.path / ".shardfs" / name

    def _read_control(self, name: str) -> str:
        p = self._control(name)
        try:
            with open(p, encoding="utf-8") as f:
                return f.read()
        except FileNotFoundError:
            raise ShardfsError(
                "%s: no such file: %s is not a shardfs mount (mount it with "
                "`shardfs SRC %s -o world=W,workers=K`)"
                % (p, self.path, self.path)) from None
        except OSError as e:
            raise ShardfsError("%s: %s: is the shardfs daemon serving %s "
                               "still running? (remount it)"
                               % (p, e.strerror, self.path)) from None

    def refresh(self) -> None:
        """Read `.shardfs/status` again."""
        text = self._read_control("status")
        try:
            status = json.loads(text)
            options = status["options"]
            plan = status["plan"]
            self.world = int(options["world"])
            self.workers = int(options["workers"])
            self.batch = int(options["batch"])
            self.per_reader = int(plan["per_reader"])
            # no rank= option: every rank (status lists none)
            self.ranks = (sorted(int(r) for r in options["ranks"])
                          or list(range(self.world)))
        except (ValueError, KeyError, TypeError) as e:
            raise ShardfsError(
                "%s: not the status this package knows (%s: %s): use the "
                "shardfs Python package of the same release as the daemon"
                % (self._control("status"), type(e).__name__, e)) from None
        self.status = status
        self.options = options

    @property
    def epoch(self) -> int:
        """The epoch served now (`.shardfs/epoch`)."""
        # a writer that truncates (`echo 3 > epoch`) leaves it empty to
        # readers for a moment: read again, for at most ~0.2 s
        for _ in range(40):
            text = self._read_control("epoch").strip()
            if text:
                break
            time.sleep(0.005)
        return self._epoch_of(text)

    def _epoch_of(self, text: str) -> int:
        try:
            return int(text)
        except ValueError:
            raise ShardfsError("%s holds %r, not an epoch number: is this "
                               "a shardfs mount?"
                               % (self._control("epoch"), text)) from None

    def plan(self) -> Dict[str, Any]:
        """The plan being served (`.shardfs/plan.json`, docs/plan.md)."""
        text = self._read_control("plan.json")
        try:
            return json.loads(text)
        except ValueError as e:
            raise ShardfsError("%s: not JSON (%s): read it again after the "
                               "epoch switch" % (self._control("plan.json"),
                                                 e)) from None

    # -- the reader directories ----------------------------------------

    def _rank(self, rank: Optional[int]) -> int:
        r = job_rank() if rank is None else rank
        if not isinstance(r, int) or r < 0 or r >= self.world:
            raise MountMismatch(
                "rank %r is not a rank of the mount %s (world=%d): ranks are "
                "0..%d" % (r, self.path, self.world, self.world - 1))
        if r not in self.ranks:
            raise MountMismatch(
                "rank %d is not served by the mount %s (it serves rank=%s): "
                "read rank %d's view on the mount of its node, or mount one "
                "with rank=%d" % (r, self.path, _ranges(self.ranks), r, r))
        return r

    def _worker(self, worker: Optional[int]) -> int:
        if worker is None:
            info = _worker_info()
            worker = info.id if info is not None else 0
        if not isinstance(worker, int) or worker < 0 or worker >= self.workers:
            raise MountMismatch(
                "worker %r is not a worker of the mount %s (workers=%d): "
                "give the DataLoader num_workers=%d, or remount with "
                "workers=%d" % (worker, self.path, self.workers, self.workers,
                                (worker + 1) if isinstance(worker, int)
                                else self.workers))
        return worker

    def reader_dir(self, rank: Optional[int] = None,
                   worker: Optional[int] = None) -> Path:
        """`MNT/<rank>/<worker>`: what one reader reads this epoch.

        rank defaults to the job's (torch.distributed when initialised,
        else the environment's RANK, else 0), worker to the DataLoader
        worker's id (0 outside a worker).  Raises MountMismatch for a rank
        or worker the mount does not serve."""
        return self.path / str(self._rank(rank)) / str(self._worker(worker))

    def files(self, rank: Optional[int] = None,
              worker: Optional[int] = None) -> List[Path]:
        """The reader's files in reading order (the plan's), listed now:
        list again after an epoch switch.  A `files` dataset keeps its
        sub-directories; its files are ordered by their sequence number.
        On a followed source (follow=1): its complete windows, without
        `stream.<ext>` (the same bytes end to end)."""
        d = self.reader_dir(rank, worker)
        try:
            names = os.listdir(d)
        except OSError as e:
            raise ShardfsError("%s: %s: is the shardfs daemon serving %s "
                               "still running? (remount it)"
                               % (d, e.strerror, self.path)) from None
        out: List[Path] = []
        subdirs = False
        # a followed source (follow=1): its windows; stream.<ext> holds
        # the same bytes again, end to end (docs/follow.md)
        follow = self.status.get("follow")
        stream = ("stream." + str(follow.get("format"))
                  if isinstance(follow, dict) else None)
        for name in names:
            if name == stream:
                continue
            p = d / name
            if not p.is_symlink() and p.is_dir():
                subdirs = True
                for top, _, inner in os.walk(p):
                    out.extend(Path(top) / n for n in inner)
            else:
                out.append(p)
        if subdirs:
            out.sort(key=lambda p: (p.name, str(p)))
        else:
            out.sort()
        return out

    # -- epochs ------------------------------------------------------------

    def set_epoch(self, epoch: int, timeout: float = 600.0) -> None:
        """Serve `epoch`, and return once it is the epoch readers see
        (`.shardfs/epoch` and `status` read back).  Writing the epoch that
        is served changes nothing.  Do it before the epoch's DataLoader
        iterator starts: its workers list their directories then.

        The daemon answers the write once the switch is done; if another
        process then switches the mount to another epoch before this one
        has read it back (the status's `epoch_switches` has moved on),
        raises ShardfsError at once naming both epochs: this process's
        readers would read the other one.  Every process that switches a
        mount must ask for the same epoch."""
        if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 0:
            raise ValueError("set_epoch(%r): the epoch is a non-negative "
                             "integer" % (epoch,))
        before = self._switches()
        p = self._control("epoch")
        try:
            # no O_TRUNC: a truncate is a request of its own, during which
            # another process may read the file empty
            fd = os.open(p, os.O_WRONLY)
            try:
                os.write(fd, b"%d\n" % epoch)
            finally:
                os.close(fd)
        except OSError as e:
            hint = {
                errno.EROFS: "the mount is read-only (mounted with ro?): "
                             "remount it without ro",
                errno.EACCES: "this user may not write it: switch the "
                              "epoch as the user that mounted it",
                errno.ENOENT: "%s is not a shardfs mount" % self.path,
            }.get(e.errno, "the daemon's log says why")
            raise ShardfsError("%s: cannot switch to epoch %d: %s: %s"
                               % (p, epoch, e.strerror, hint)) from None
        self._wait_epoch(epoch, timeout, switched=before)

    def _switches(self) -> int:
        """The status's count of epoch switches, read now."""
        self.refresh()
        try:
            return int(self.status["counters"]["epoch_switches"])
        except (KeyError, TypeError, ValueError) as e:
            raise ShardfsError(
                "%s: not the status this package knows (%s: %s): use the "
                "shardfs Python package of the same release as the daemon"
                % (self._control("status"), type(e).__name__, e)) from None

    def _wait_epoch(self, epoch: int, timeout: float,
                    switched: Optional[int] = None) -> None:
        """Until both `epoch` and `status` say `epoch` (another process's
        write may still be under way).  `switched`: this process's write
        of `epoch` returned, so the switch was done, and the status
        counted `switched` switches before it: another epoch served since
        was switched to after it, which is raised at once."""
        deadline = time.monotonic() + timeout
        delay = 0.001
        while True:
            # empty while another process truncates it (`echo 3 > epoch`)
            text = self._read_control("epoch").strip()
            served = self._epoch_of(text) if text else None
            if served == epoch or (served is not None and
                                   switched is not None):
                self.refresh()
                now = int(self.options["epoch"])
                if now == epoch:
                    return
                switches = int(self.status["counters"]["epoch_switches"])
                if switched is not None and switches > switched:
                    raise ShardfsError(
                        "%s was switched to epoch %d, then to epoch %d by "
                        "another process before this one read it back (its "
                        "epoch_switches went from %d to %d): this process's "
                        "readers would read epoch %d, not %d; every process "
                        "that switches a mount must ask for the same epoch: "
                        "find the job or user that writes %s (the daemon "
                        "logs \"now serving epoch %d\")"
                        % (self.path, epoch, now, switched, switches, now,
                           epoch, self._control("epoch"), now))
            if time.monotonic() >= deadline:
                raise ShardfsError(
                    "%s still serves epoch %s, not %d, after %.0f s: the "
                    "process that switches it (rank %d of the mount) did not; "
                    "see the daemon's log" % (self.path,
                                              served if text else "(none: "
                                              "being written)", epoch,
                                              timeout, self.ranks[0]))
            time.sleep(delay)
            delay = min(delay * 2, 0.05)

    def wait_epoch(self, epoch: int, timeout: float = 600.0) -> None:
        """Return once the mount serves `epoch` (switched by another
        process: the rank that owns the mount); ShardfsError after
        `timeout` seconds."""
        self._wait_epoch(epoch, timeout)

    def resume_start(self, steps: int) -> int:
        """The `start=` of a mount that resumes this mount's epoch after
        `steps` batches per rank (this mount's world, batch and start)."""
        if self.options.get("partition") != "interleaved":
            raise ShardfsError(
                "%s is mounted with partition=%s: an epoch resumes exactly "
                "only from partition=interleaved (mount with "
                "partition=interleaved,batch=B; docs/plan.md)"
                % (self.path, self.options.get("partition")))
        return resume_start(steps, self.world, self.batch,
                            int(self.options.get("start", 0)))

    # -- the running job ---------------------------------------------------

    def check_job(self, world: Optional[int] = None,
                  workers: Optional[int] = None,
                  batch: Optional[int] = None,
                  rank: Optional[int] = None) -> None:
        """Raise MountMismatch unless the running job reads this mount as
        it was planned for: its world size (given, else torch.distributed's,
        else WORLD_SIZE, else 1), its DataLoader's num_workers (given, else
        the worker info's when called in a DataLoader worker, else not
        checked), its batch size (when given) and its rank (given, else the
        job's) one this mount serves.  The message names every difference,
        both values and the fix."""
        if world is None:
            world, where = job_world()
        else:
            where = "given"
        self._check_job(world, where, workers, batch, rank)

    def _check_job(self, world: int, where: str, workers: Optional[int],
                   batch: Optional[int], rank: Optional[int]) -> None:
        """check_job with the world size found (`where` says where)."""
        problems: List[str] = []
        if world != self.world:
            problems.append(
                "the mount %s is planned for world=%d but the job has "
                "world=%d (%s): remount with world=%d, or run %d ranks"
                % (self.path, self.world, world, where, world, self.world))
        if workers is None:
            info = _worker_info()
            if info is not None:
                workers = int(info.num_workers)
        if workers is not None:
            workers = max(int(workers), 1)
            if workers != self.workers:
                problems.append(
                    "the mount %s is planned for workers=%d but the "
                    "DataLoader has num_workers=%d: give the DataLoader "
                    "num_workers=%d (0 reads a workers=1 mount), or remount "
                    "with workers=%d" % (self.path, self.workers, workers,
                                         self.workers, workers))
        if batch is not None and batch != self.batch:
            problems.append(
                "the mount %s is planned for batch=%d but the loader's batch "
                "size is %d: give the loader batch_size=%d, or remount with "
                "batch=%d" % (self.path, self.batch, batch, self.batch, batch))
        try:
            self._rank(job_rank() if rank is None else rank)
        except MountMismatch as e:
            problems.append(str(e))
        if problems:
            raise MountMismatch("\n".join(problems))
