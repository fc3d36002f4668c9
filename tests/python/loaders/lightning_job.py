"""A Lightning job: python lightning_job.py MNT OUT EPOCHS WORKERS BATCH
[STRATEGY] [--save CKPT] [--resume CKPT] [--persistent].
Trainer(strategy="ddp", accelerator="cpu", devices=2), an IterableDataset
over the Parquet views (shardfs.ShardfsDataset, rows read with pyarrow),
the epoch switched by shardfs's Lightning callback.  Every training step
records the keys of its batch; each rank writes OUT/rank<r>-epoch<e>.json.
--save writes a checkpoint when fit returns (trainer.save_checkpoint),
--resume fits from one (ckpt_path=), --persistent gives the
DataLoader persistent_workers=True, --stateful makes it torchdata's
StatefulDataLoader, --max-steps N stops the fit after N steps and
--ckpt-every N DIR writes a checkpoint into DIR every N steps.  Lightning's ddp launcher starts rank
1 by running this file again.  Each rank writes what it did and how it
ended to OUT/rank<r>.log (its traceback, or a fatal signal's stacks), so
that a failed job says what every rank said, not only what came last on
the shared stderr."""
from __future__ import annotations

import faulthandler
import json
import os
import signal
import sys
import time
import traceback

import pytorch_lightning as pl
import torch
from torch.utils.data import DataLoader

import shardfs
from shardfs.lightning import ShardfsEpoch


class MarkedSamples:
    """A file's rows (shardfs.samples), after marking in OUT/started/ that
    this worker (MNT/<rank>/<worker>/ in the path) has listed its files."""

    def __init__(self, out: str) -> None:
        self.out = out
        self.marked: set = set()

    def __call__(self, path):
        rank, worker = os.path.normpath(path).split(os.sep)[-3:-1]
        if (rank, worker) not in self.marked:
            self.marked.add((rank, worker))
            d = os.path.join(self.out, "started")
            os.makedirs(d, exist_ok=True)
            open(os.path.join(d, "%s-%s-%d" % (rank, worker, os.getpid())),
                 "w").close()
        return shardfs.samples(path)


class LoggedDataset(shardfs.ShardfsDataset):
    """shardfs.ShardfsDataset whose workers say in their rank's log that
    they started (with their pid, in OUT/workers/ too, for the rank to ask
    them for their stacks with SIGUSR1), how many samples they read, or
    their traceback: a worker's error otherwise reaches the rank only when
    it asks that worker for a batch."""

    def __init__(self, mnt: str, out: str, **kwargs) -> None:
        super().__init__(mnt, **kwargs)
        self.out = out

    def __iter__(self):
        log = rank_log(self.out)
        info = torch.utils.data.get_worker_info()
        wid = info.id if info else 0
        d = os.path.join(self.out, "workers")
        os.makedirs(d, exist_ok=True)
        open(os.path.join(d, "%d-%d-%d" % (rank_of_process(), wid,
                                           os.getpid())), "w").close()
        faulthandler.register(signal.SIGUSR1, file=log, all_threads=True)
        say(log, "worker %d iterates" % wid)
        n = 0
        try:
            for sample in super().__iter__():
                n += 1
                yield sample
        except BaseException:
            say(log, "worker %d failed after %d samples:\n%s"
                % (wid, n, traceback.format_exc(limit=-8)))
            raise
        say(log, "worker %d read %d samples" % (wid, n))


def row(sample):
    """A Parquet row -> (key, a feature): bytes and nulls do not collate."""
    data = sample["data"]
    return sample["key"], float(len(data) if data is not None else -1)


class Model(pl.LightningModule):
    def __init__(self, out: str) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(1, 1)
        self.out = out
        self.keys: list = []
        self.served = -1

    def on_train_start(self) -> None:
        # the first epoch's DataLoader iterator exists now (Lightning 2.1.4
        # makes it in FitLoop.setup_data): wait until its workers have
        # listed their directories, so that what they list does not depend
        # on whether they or this rank are faster (workers from a fork
        # server start slowly, and most often list after the rank has
        # reached on_train_epoch_start; forked ones, or a busy machine,
        # not)
        # (60 s at most: then the rank's log gets every worker's stacks,
        # and the fit goes on, so that a worker's error is raised by the
        # DataLoader; a late listing fails the test's plan check)
        d = os.path.join(self.out, "started")
        deadline = time.monotonic() + 60
        while len(entries(d, self.global_rank)) < 2:
            if time.monotonic() > deadline:
                self.say("its workers have not all listed their files in "
                         "60 s (%s); its processes:\n%s\nthe workers' "
                         "stacks follow" % (entries(d, self.global_rank),
                                            descendants()))
                for name in entries(os.path.join(self.out, "workers"),
                                    self.global_rank):
                    os.kill(int(name.split("-")[2]), signal.SIGUSR1)
                time.sleep(1)
                return
            time.sleep(0.05)
        self.say("its workers have listed their files")

    def on_train_epoch_start(self) -> None:
        # after the callbacks' hook: the epoch the callback made the mount
        # serve (at the epoch's end, on a shared mount, another rank may
        # already have switched to the next)
        self.served = shardfs.Mount(MNT).epoch
        self.say("epoch %d starts, the mount serves epoch %d"
                 % (self.current_epoch, self.served))

    def training_step(self, batch, batch_idx):
        keys, x = batch
        self.keys.append(list(keys))
        y = self.layer(x.float().view(-1, 1) / 1000.0)
        return (y ** 2).mean()

    def on_train_epoch_end(self) -> None:
        with open(os.path.join(self.out, "rank%d-epoch%d.json"
                               % (self.global_rank, self.current_epoch)),
                  "w") as f:
            json.dump({"epoch_served": self.served,
                       "batches": self.keys}, f)
        self.say("epoch %d ends after %d batches"
                 % (self.current_epoch, len(self.keys)))
        self.keys = []

    def say(self, what: str) -> None:
        with open(os.path.join(self.out, "rank%d.log" % self.global_rank),
                  "a") as log:
            say(log, what)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


MNT = sys.argv[1]


def rank_of_process() -> int:
    """Lightning's launcher sets LOCAL_RANK in the ranks it starts (one
    node: the global rank), and their DataLoader workers inherit it; the
    first rank has none."""
    return int(os.environ.get("LOCAL_RANK", "0"))


def rank_log(out: str):
    """OUT/rank<r>.log of this rank (or of a worker of it), line-buffered,
    with faulthandler's stacks on a fatal signal."""
    log = open(os.path.join(out, "rank%d.log" % rank_of_process()), "a",
               buffering=1)
    faulthandler.enable(file=log, all_threads=True)
    return log


def entries(d: str, rank: int) -> list:
    """The names in d (OUT/started or OUT/workers) of rank's workers."""
    return sorted(n for n in (os.listdir(d) if os.path.isdir(d) else [])
                  if n.startswith("%d-" % rank))


def descendants() -> str:
    """One line for each process this one started, and theirs: pid,
    state, kernel wait channel and command line (from /proc)."""
    parent = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open("/proc/%s/stat" % pid) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            parent[int(pid)] = (int(fields[1]), fields[0])
        except (OSError, IndexError, ValueError):
            continue
    lines, mine = [], {os.getpid()}
    for pid in sorted(parent):
        if parent[pid][0] in mine:
            mine.add(pid)
            try:
                with open("/proc/%d/wchan" % pid) as f:
                    wchan = f.read()
                with open("/proc/%d/cmdline" % pid, "rb") as f:
                    cmd = f.read().replace(b"\0", b" ").decode()[:160]
            except OSError:
                wchan = cmd = "?"
            lines.append("  %d %s %s %s" % (pid, parent[pid][1], wchan, cmd))
    return "\n".join(lines) or "  none"


def say(log, what: str) -> None:
    log.write("%.3f pid %d: %s\n" % (time.time(), os.getpid(), what))


def option(name: str) -> "str | None":
    """The value after --NAME in the command line, or None."""
    args = sys.argv[6:]
    return args[args.index(name) + 1] if name in args else None


def main() -> None:
    mnt, out, epochs, workers, batch = sys.argv[1:6]
    log = rank_log(out)
    say(log, "started")
    try:
        fit(mnt, out, epochs, workers, batch)
    except BaseException:
        # the innermost frames: Lightning's loops are 30 deep
        say(log, "failed:\n" + traceback.format_exc(limit=-8))
        raise
    say(log, "fit returned")


def fit(mnt: str, out: str, epochs: str, workers: str, batch: str) -> None:
    strategy = sys.argv[6] if len(sys.argv) > 6 and \
        not sys.argv[6].startswith("--") else "ddp"
    ds = LoggedDataset(mnt, out, samples=MarkedSamples(out),
                                transform=row,
                                batch_size=int(batch))
    # workers started by a fork server, not forked from a rank: a rank has
    # gloo's threads, and CPython 3.11's fork can deadlock in its child
    # (PyOS_AfterFork_Child waiting for a lock one of them held; seen here)
    # --stateful: torchdata's StatefulDataLoader, whose state Lightning
    # saves in a checkpoint and gives back to it on a resume mid-epoch
    make = DataLoader
    if "--stateful" in sys.argv:
        from torchdata.stateful_dataloader import StatefulDataLoader
        make = StatefulDataLoader
    loader = make(ds, batch_size=int(batch), num_workers=int(workers),
                  multiprocessing_context="forkserver",
                  persistent_workers="--persistent" in sys.argv)
    # --ckpt-every N DIR: a checkpoint every N steps, mid-epoch
    every = []
    if option("--ckpt-every"):
        args = sys.argv[sys.argv.index("--ckpt-every") + 1:]
        every = [pl.callbacks.ModelCheckpoint(
            dirpath=args[1], every_n_train_steps=int(args[0]),
            save_top_k=-1)]
    trainer = pl.Trainer(strategy=strategy, accelerator="cpu", devices=2,
                         max_epochs=int(epochs),
                         max_steps=int(option("--max-steps") or -1),
                         use_distributed_sampler=False,
                         callbacks=[ShardfsEpoch(mnt)] + every,
                         logger=False, enable_checkpointing=bool(every),
                         enable_progress_bar=False,
                         enable_model_summary=False)
    trainer.fit(Model(out), loader, ckpt_path=option("--resume"))
    save = option("--save")
    if save:
        trainer.save_checkpoint(save)


if __name__ == "__main__":
    main()
