"""Resuming an epoch without reading it again: torchdata's
StatefulDataLoader over shardfs.ShardfsDataset (its state_dict() and
load_state_dict()) stops after a few batches, saves its state, and a new
process resumes from it: together they read exactly the epoch's plan,
no sample twice, none missing; and, the page cache dropped, the daemon
serves the resumed process only what was left (its `bytes` counter).
And a partition=interleaved epoch stopped at world 4 resumes at world 2
on a mount with start= Mount.resume_start(steps): the state of the
stopped job's ranks names another view, so the dataset reads the new
view from its start, which is exactly the rest."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List

import pytest

from helpers import plan, planned_samples

JOB = Path(__file__).with_name("resume_job.py")


def job(mnt: Path, out: Path, stop: int, state: Path = None,
        rank: int = 0, world: int = 1) -> List[List[str]]:
    out.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(world))
    p = subprocess.run([sys.executable, str(JOB), str(mnt), str(out),
                        str(stop)] + ([str(state)] if state else []),
                       env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-4000:]
    return json.loads((out / "batches.json").read_text())


def keys(src: Path, p: Dict[str, Any], rank: int, worker: int,
         cache: Dict[str, List[str]]) -> List[str]:
    out = []
    for shard, i in planned_samples(p, rank, worker):
        if shard not in cache:
            if shard.endswith(".jsonl"):
                cache[shard] = [json.loads(ln)["key"] for ln in
                                (src / shard).read_text().splitlines()]
            else:
                import pyarrow.parquet as pq
                cache[shard] = pq.read_table(src / shard).column(
                    "key").to_pylist()
        out.append(cache[shard][i])
    return out


def in_turns(per_worker: List[List[str]], batch: int) -> List[str]:
    """The keys a DataLoader gives: a batch of each worker in turn."""
    out: List[str] = []
    chunks = [[w[i:i + batch] for i in range(0, len(w), batch)]
              for w in per_worker]
    for group in zip(*chunks):
        for c in group:
            out.extend(c)
    return out


def served_bytes(mnt: Path) -> int:
    status = json.loads((mnt / ".shardfs" / "status").read_text())
    return status["counters"]["bytes"]


def drop_caches() -> None:
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3")


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_stateful_dataloader_resumes_exactly(fmt, data, mount, tmp_path,
                                             capsys) -> None:
    src = data(fmt, 6, "10-30", seed=11)
    opts = "world=1,workers=2,batch=4,block=9"
    mnt = mount(src, opts + ",prefetch=0")
    p = plan(src, opts)
    cache: Dict[str, List[str]] = {}
    want = in_turns([keys(src, p, 0, w, cache) for w in range(2)], 4)
    steps = len(want) // 4
    report = []
    for stop in (1, 3, steps // 2 + 1, steps - 1):
        out = tmp_path / ("stop%d" % stop)
        first = job(mnt, out / "a", stop)
        assert len(first) == stop
        drop_caches()
        before = served_bytes(mnt)
        rest = job(mnt, out / "b", -1, out / "a" / "state")
        read = served_bytes(mnt) - before
        got = [k for b in first + rest for k in b]
        assert got == want, "stopped after %d batches" % stop
        report.append((stop, read))
    # the whole epoch, for comparison
    drop_caches()
    before = served_bytes(mnt)
    assert [k for b in job(mnt, tmp_path / "all", -1) for k in b] == want
    whole = served_bytes(mnt) - before
    with capsys.disabled():
        print("\n%s: %d batches; bytes served to the resumed process, "
              "by the batch it resumed after: %s; the whole epoch: %d"
              % (fmt, steps, ", ".join("%d: %d" % r for r in report),
                 whole))
    if fmt == "jsonl":
        # lines resume at the byte after the last line read: what the
        # resumed process is served falls as the stop moves later
        reads = [r for _, r in report]
        assert reads == sorted(reads, reverse=True) and reads[0] < whole


def test_interleaved_world_4_resumes_at_world_2(data, mount, tmp_path
                                                ) -> None:
    src = data("jsonl", 6, "10-30", seed=12)
    opts = "world=4,workers=2,batch=2,partition=interleaved,block=5"
    mnt = mount(src, opts)
    p = plan(src, opts)
    stop = 2
    read: List[str] = []
    cache: Dict[str, List[str]] = {}
    for r in range(4):
        got = [k for b in job(mnt, tmp_path / ("w4-%d" % r), stop,
                              rank=r, world=4) for k in b]
        assert got == in_turns([keys(src, p, r, w, cache)
                                for w in range(2)], 2)[:stop * 2], r
        read += got
    import shardfs
    start = shardfs.Mount(mnt).resume_start(stop)
    assert start == stop * 4 * 2
    opts2 = "world=2,workers=2,batch=2,partition=interleaved,block=5," \
        "start=%d" % start
    mnt2 = mount(src, opts2)
    p2 = plan(src, opts2)
    for r in range(2):
        got = [k for b in job(mnt2, tmp_path / ("w2-%d" % r), -1,
                              tmp_path / ("w4-%d" % r) / "state",
                              rank=r, world=2) for k in b]
        assert got == in_turns([keys(src, p2, r, w, cache)
                                for w in range(2)], 2)
        read += got
    # every sample of the epoch read, none missing; read twice only as
    # padding (each plan pads its own end: the world=2 plan of the rest
    # pads it again, so the two plans' padded samples may differ)
    everything = [k for r in range(4) for w in range(2)
                  for k in keys(src, p, r, w, cache)]
    assert set(read) == set(everything)
    assert len(read) - len(set(read)) <= p["padding"] + p2["padding"]
    assert len(read) == stop * 4 * 2 + 2 * 2 * p2["per_reader"]


def test_another_ranks_state_is_refused(data, mount, tmp_path) -> None:
    """A rank given another rank's state of the same view (what Lightning
    gives every rank without ShardfsEpoch: rank 0's) fails, naming both
    ranks and the fix, rather than reading its view again from the start
    while the loader counts the steps of the other rank."""
    src = data("jsonl", 6, "10-30", seed=12)
    mnt = mount(src, "world=2,workers=2,batch=2")
    job(mnt, tmp_path / "r0", 2, rank=0, world=2)
    env = dict(os.environ, RANK="1", WORLD_SIZE="2")
    out = tmp_path / "r1"
    out.mkdir()
    p = subprocess.run([sys.executable, str(JOB), str(mnt), str(out), "-1",
                        str(tmp_path / "r0" / "state")],
                       env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode != 0
    assert ("shardfs._mount.ShardfsError: %s/1/0: the state to resume is "
            "rank 0's, and this is rank 1: each rank resumes from its own "
            "state (Lightning saves rank 0's DataLoader state only: give the "
            "Trainer shardfs.lightning.ShardfsEpoch, which keeps every "
            "rank's)" % mnt) in p.stderr, p.stderr[-3000:]
