"""The shardfs package against real mounts: attributes, reader
directories and files (exactly the plan's), epoch switches, check_job's
messages, the PyTorch dataset, the sample readers, resume_start and
`python -m shardfs status`."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List

import pytest

import shardfs
from shardfs import _mount
from helpers import plan, planned_samples, reader_runs

OPTS = "world=2,workers=2,batch=2"


def source_lines(src: Path, shard: str) -> List[bytes]:
    lines = (src / shard).read_bytes().splitlines(keepends=True)
    return [ln if ln.endswith(b"\n") else ln + b"\n" for ln in lines]


def expected_lines(src: Path, p: Dict, rank: int, worker: int) -> List[bytes]:
    cache: Dict[str, List[bytes]] = {}
    out = []
    for shard, i in planned_samples(p, rank, worker):
        if shard not in cache:
            cache[shard] = source_lines(src, shard)
        out.append(cache[shard][i])
    return out


def read_lines(files: List[Path]) -> List[bytes]:
    return [ln for f in files for ln in shardfs.samples(f)]


def test_import_needs_only_the_standard_library() -> None:
    code = ("import sys, shardfs; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('torch', 'pyarrow', 'lightning', 'pytorch_lightning', "
            "'numpy')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True,
                         text=True, check=True).stdout
    assert out == "[]\n"


def test_attributes_are_the_status(data, mount) -> None:
    src = data("jsonl", 7, "5-40")
    m = shardfs.Mount(mount(src, OPTS + ",epoch=2"))
    p = plan(src, OPTS + ",epoch=2")
    assert (m.world, m.workers, m.batch, m.epoch) == (2, 2, 2, 2)
    assert m.per_reader == p["per_reader"]
    assert m.ranks == [0, 1]
    assert m.options["shuffle"] == "units"
    assert repr(m) == ("shardfs.Mount(%r: world=2, workers=2, batch=2, "
                       "ranks=0-1, per_reader=%d)" % (str(m.path),
                                                      p["per_reader"]))


def test_files_are_the_plan(data, mount) -> None:
    src = data("jsonl", 7, "5-40")
    opts = "world=2,workers=2,batch=2,block=9,shuffle=samples,seed=3"
    m = shardfs.Mount(mount(src, opts))
    p = plan(src, opts)
    for rank in range(2):
        for worker in range(2):
            files = m.files(rank, worker)
            assert len(files) == len(reader_runs(p, rank, worker))
            assert [f.parent for f in files] == [m.path / str(rank) /
                                                  str(worker)] * len(files)
            assert [f.name[:7] for f in files] == ["%06d-" % i for i in
                                                    range(len(files))]
            lines = read_lines(files)
            assert len(lines) == p["per_reader"]
            assert lines == expected_lines(src, p, rank, worker)


def test_reader_dir_defaults(data, mount, monkeypatch) -> None:
    src = data("jsonl", 7, "5-40")
    m = shardfs.Mount(mount(src, OPTS))
    monkeypatch.delenv("RANK", raising=False)
    assert m.reader_dir() == m.path / "0" / "0"
    monkeypatch.setenv("RANK", "1")
    assert m.reader_dir() == m.path / "1" / "0"
    assert m.reader_dir(worker=1) == m.path / "1" / "1"
    assert m.files() == m.files(1, 0)
    monkeypatch.setenv("RANK", "x")
    with pytest.raises(shardfs.ShardfsError) as e:
        m.reader_dir()
    assert str(e.value) == ("RANK='x' in the environment is not a number: "
                            "set it to this process's rank")
    with pytest.raises(shardfs.MountMismatch) as e:
        m.reader_dir(2, 0)
    assert str(e.value) == ("rank 2 is not a rank of the mount %s (world=2): "
                            "ranks are 0..1" % m.path)
    with pytest.raises(shardfs.MountMismatch) as e:
        m.reader_dir(0, 2)
    assert str(e.value) == (
        "worker 2 is not a worker of the mount %s (workers=2): give the "
        "DataLoader num_workers=2, or remount with workers=3" % m.path)


def test_reader_dir_from_torch(data, mount, monkeypatch, tmp_path) -> None:
    """torch.distributed's rank wins over RANK; a DataLoader worker reads
    its own directory."""
    import torch.distributed as dist
    from torch.utils.data import DataLoader, IterableDataset

    src = data("jsonl", 7, "5-40")
    m = shardfs.Mount(mount(src, "world=1,workers=3"))
    monkeypatch.setenv("RANK", "5")

    class Dirs(IterableDataset):
        def __iter__(self):
            yield str(m.reader_dir())

    dist.init_process_group("gloo", init_method="file://%s" % (
        tmp_path / "store"), rank=0, world_size=1)
    try:
        assert m.reader_dir() == m.path / "0" / "0"
        m.check_job(workers=3)
        got = sorted(x for x in DataLoader(Dirs(), num_workers=3,
                                           batch_size=None))
    finally:
        dist.destroy_process_group()
    assert got == [str(m.path / "0" / str(w)) for w in range(3)]


def test_set_epoch_serves_the_epoch(data, mount) -> None:
    src = data("jsonl", 7, "5-40")
    m = shardfs.Mount(mount(src, OPTS))
    before = m.files(1, 1)
    m.set_epoch(3)
    assert m.epoch == 3 and m.options["epoch"] == 3
    p = plan(src, OPTS + ",epoch=3")
    assert read_lines(m.files(1, 1)) == expected_lines(src, p, 1, 1)
    assert m.files(1, 1) != before
    m.set_epoch(3)  # the epoch served: nothing changes
    assert m.status["counters"]["epoch_switches"] == 2
    with pytest.raises(ValueError) as e:
        m.set_epoch(-1)
    assert str(e.value) == ("set_epoch(-1): the epoch is a non-negative "
                            "integer")


class Overtaken:
    """os for shardfs._mount (set_epoch's writer) whose write, once the daemon has answered it
    (the switch done), has a second process switch the mount to each of
    `epochs` in turn before set_epoch reads the epoch back."""

    def __init__(self, mnt: Path, epochs: List[int]) -> None:
        self.mnt, self.epochs = mnt, epochs

    def __getattr__(self, name: str):
        return getattr(os, name)

    def write(self, fd: int, data: bytes) -> int:
        n = os.write(fd, data)
        code = ("import shardfs, sys\n"
                "for e in sys.argv[2:]: shardfs.Mount(sys.argv[1])"
                ".set_epoch(int(e), timeout=10)")
        subprocess.run([sys.executable, "-c", code, str(self.mnt)]
                       + [str(e) for e in self.epochs], check=True)
        return n


def test_set_epoch_overtaken_raises_at_once(data, mount, monkeypatch
                                            ) -> None:
    src = data("jsonl", 7, "5-40")
    mnt = mount(src, OPTS)
    m = shardfs.Mount(mnt)
    assert m.status["counters"]["epoch_switches"] == 1
    monkeypatch.setattr(_mount, "os", Overtaken(mnt, [4]))
    start = time.monotonic()
    with pytest.raises(shardfs.ShardfsError) as e:
        m.set_epoch(3, timeout=60)
    assert time.monotonic() - start < 10  # not the 60 s timeout
    assert str(e.value) == (
        "%s was switched to epoch 3, then to epoch 4 by another process "
        "before this one read it back (its epoch_switches went from 1 to "
        "3): this process's readers would read epoch 4, not 3; every "
        "process that switches a mount must ask for the same epoch: find "
        "the job or user that writes %s/.shardfs/epoch (the daemon logs "
        "\"now serving epoch 4\")" % (mnt, mnt))
    assert m.epoch == 4
    # overtaken, then switched back before the read-back: served, returns
    monkeypatch.setattr(_mount, "os", Overtaken(mnt, [6, 5]))
    m.set_epoch(5, timeout=60)
    assert m.epoch == 5 and m.options["epoch"] == 5
    assert m.status["counters"]["epoch_switches"] == 6


def test_not_a_mount(tmp_path) -> None:
    with pytest.raises(shardfs.ShardfsError) as e:
        shardfs.Mount(tmp_path)
    assert str(e.value) == (
        "%s/.shardfs/status: no such file: %s is not a shardfs mount (mount "
        "it with `shardfs SRC %s -o world=W,workers=K`)"
        % (tmp_path, tmp_path, tmp_path))


def test_check_job_messages(data, mount, monkeypatch) -> None:
    src = data("jsonl", 7, "5-40")
    mnt = mount(src, "world=4,workers=2,batch=4,rank=2-3")
    m = shardfs.Mount(mnt)
    monkeypatch.setenv("WORLD_SIZE", "4")
    monkeypatch.setenv("RANK", "3")
    m.check_job(workers=2, batch=4)
    with pytest.raises(shardfs.MountMismatch) as e:
        m.check_job(world=2)
    assert str(e.value) == (
        "the mount %s is planned for world=4 but the job has world=2 "
        "(given): remount with world=2, or run 4 ranks" % mnt)
    monkeypatch.setenv("WORLD_SIZE", "8")
    with pytest.raises(shardfs.MountMismatch) as e:
        m.check_job(workers=3, batch=8)
    assert str(e.value) == "\n".join([
        "the mount %s is planned for world=4 but the job has world=8 "
        "(WORLD_SIZE): remount with world=8, or run 4 ranks" % mnt,
        "the mount %s is planned for workers=2 but the DataLoader has "
        "num_workers=3: give the DataLoader num_workers=2 (0 reads a "
        "workers=1 mount), or remount with workers=3" % mnt,
        "the mount %s is planned for batch=4 but the loader's batch size "
        "is 8: give the loader batch_size=4, or remount with batch=8" % mnt])
    monkeypatch.setenv("WORLD_SIZE", "4")
    monkeypatch.setenv("RANK", "0")
    with pytest.raises(shardfs.MountMismatch) as e:
        m.check_job()
    assert str(e.value) == (
        "rank 0 is not served by the mount %s (it serves rank=2-3): read "
        "rank 0's view on the mount of its node, or mount one with rank=0"
        % mnt)
    # every difference, the rank's too
    monkeypatch.setenv("WORLD_SIZE", "8")
    with pytest.raises(shardfs.MountMismatch) as e:
        m.check_job(workers=3)
    assert str(e.value) == "\n".join([
        "the mount %s is planned for world=4 but the job has world=8 "
        "(WORLD_SIZE): remount with world=8, or run 4 ranks" % mnt,
        "the mount %s is planned for workers=2 but the DataLoader has "
        "num_workers=3: give the DataLoader num_workers=2 (0 reads a "
        "workers=1 mount), or remount with workers=3" % mnt,
        "rank 0 is not served by the mount %s (it serves rank=2-3): read "
        "rank 0's view on the mount of its node, or mount one with rank=0"
        % mnt])
    monkeypatch.delenv("WORLD_SIZE")
    with pytest.raises(shardfs.MountMismatch) as e:
        m.check_job(rank=2)
    assert str(e.value) == (
        "the mount %s is planned for world=4 but the job has world=1 "
        "(not distributed): remount with world=1, or run 4 ranks" % mnt)


def test_dataset_reads_the_plan(data, mount, monkeypatch) -> None:
    from torch.utils.data import DataLoader

    src = data("jsonl", 7, "5-40")
    opts = "world=2,workers=2,batch=3,remainder=drop"
    mnt = mount(src, opts)
    monkeypatch.setenv("WORLD_SIZE", "2")
    p = plan(src, opts)
    for rank in range(2):
        ds = shardfs.ShardfsDataset(mnt, rank=rank, batch_size=3)
        assert len(ds) == 2 * p["per_reader"]
        batches = list(DataLoader(ds, batch_size=3, num_workers=2))
        assert all(len(b) == 3 for b in batches)
        # the DataLoader takes a batch from each worker in turn
        per_worker: List[List[bytes]] = [[], []]
        for i, b in enumerate(batches):
            per_worker[i % 2].extend(b)
        for w in range(2):
            assert per_worker[w] == expected_lines(src, p, rank, w)
    with pytest.raises(Exception) as e:
        list(DataLoader(shardfs.ShardfsDataset(mnt, rank=0), batch_size=3,
                        num_workers=3))
    assert ("MountMismatch: the mount %s is planned for workers=2 but the "
            "DataLoader has num_workers=3: give the DataLoader num_workers=2 "
            "(0 reads a workers=1 mount), or remount with workers=3"
            % mnt) in str(e.value)


@pytest.mark.parametrize("context", ["spawn", "forkserver"])
def test_dataset_workers_read_the_job_of_the_main_process(
        context, data, mount, monkeypatch, tmp_path) -> None:
    """A worker started by spawn or forkserver has no process group: it
    reads the rank and world of the process that started it
    (torch.distributed's: rank 0 of 1), not the RANK and WORLD_SIZE it
    would find alone (here 1 of 2, which torch.distributed's win over)."""
    import torch.distributed as dist
    from torch.utils.data import DataLoader

    src = data("jsonl", 7, "5-40")
    opts = "world=1,workers=2,batch=3,remainder=drop"
    mnt = mount(src, opts)
    p = plan(src, opts)
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "1")
    ds = shardfs.ShardfsDataset(mnt, batch_size=3)
    dist.init_process_group("gloo", init_method="file://%s" % (
        tmp_path / "store"), rank=0, world_size=1)
    try:
        batches = list(DataLoader(ds, batch_size=3, num_workers=2,
                                  multiprocessing_context=context))
    finally:
        dist.destroy_process_group()
    per_worker: List[List[bytes]] = [[], []]
    for i, b in enumerate(batches):
        per_worker[i % 2].extend(b)
    for w in range(2):
        assert per_worker[w] == expected_lines(src, p, 0, w)


@pytest.mark.parametrize("fmt", ["tar", "tfrecord", "parquet", "jsonl"])
def test_sample_readers_count_the_plan(fmt, data, mount) -> None:
    src = data(fmt, 5, "3-30")
    opts = "world=2,workers=2,block=7"
    m = shardfs.Mount(mount(src, opts))
    p = plan(src, opts)
    for rank in range(2):
        for worker in range(2):
            got = [s for f in m.files(rank, worker)
                   for s in shardfs.samples(f)]
            assert len(got) == p["per_reader"]
    if fmt == "tar":
        assert set(got[0]) >= {"__key__", "__url__"}


def test_resume_start(data, mount) -> None:
    src = data("jsonl", 7, "5-40")
    m = shardfs.Mount(mount(src, "world=2,workers=2,batch=4,"
                                 "partition=interleaved,start=8"))
    assert m.resume_start(3) == 8 + 3 * 2 * 4
    assert shardfs.resume_start(3, world=4, batch=4) == 48
    c = shardfs.Mount(mount(src, OPTS))
    with pytest.raises(shardfs.ShardfsError) as e:
        c.resume_start(3)
    assert str(e.value) == (
        "%s is mounted with partition=contiguous: an epoch resumes exactly "
        "only from partition=interleaved (mount with partition=interleaved,"
        "batch=B; docs/plan.md)" % c.path)


def test_status_command(data, mount) -> None:
    src = data("jsonl", 7, "5-40")
    mnt = mount(src, OPTS + ",rank=1")
    p = plan(src, OPTS)
    out = subprocess.run([sys.executable, "-m", "shardfs", "status",
                          str(mnt)], capture_output=True, text=True,
                         check=True).stdout
    readers = [r for r in p["readers"] if r["rank"] == 1]
    want = [
        "%s: source %s" % (mnt, src),
        "epoch 0  world=2 workers=2 batch=2  ranks 1",
        "options: seed=0,shuffle=units,block=0,remainder=pad,"
        "partition=contiguous,start=0,replicas=1,epoch_size=0",
        "index: 7 shards, %d samples, %d bytes" % (
            p["samples"], sum(os.path.getsize(src / f) for f in
                              os.listdir(src) if f.endswith(".jsonl"))),
        "per reader: %d samples (%d steps of batch 2 per worker); padding "
        "%d, dropped 0" % (p["per_reader"], p["per_reader"] // 2,
                           p["padding"]),
    ] + ["  1/%d: %d samples (%d padding) in %d files"
         % (r["worker"], r["samples"], r["padding"], len(r["files"]))
         for r in readers]
    assert out.splitlines() == want
    bad = subprocess.run([sys.executable, "-m", "shardfs", "status",
                          str(src)], capture_output=True, text=True)
    assert bad.returncode == 2
    assert bad.stderr == (
        "shardfs: %s/.shardfs/status: no such file: %s is not a shardfs "
        "mount (mount it with `shardfs SRC %s -o world=W,workers=K`)\n"
        % (src, src, src))
