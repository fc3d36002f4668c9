"""DDP jobs (gloo, CPU, torch 2.15.0 from PyPI) reading mounts through
shardfs.ShardfsDataset: a job that matches its mounts reads exactly the
plan of every epoch, every rank the same number of steps, its DataLoader
workers forked, spawned or started by a forkserver; a job whose
world or num_workers differ from the mount's fails at start, on every
rank, with MountMismatch's message."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import List, Optional, Tuple

import pytest

from helpers import plan, planned_samples

JOB = Path(__file__).with_name("ddp_job.py")


def launch(world: int, mounts: List[Path], out: Path, epochs: str,
           workers: int, batch: int, context: Optional[str] = None,
           fsdp: bool = False) -> List[Tuple[int, str]]:
    """Run the job's ranks; (exit status, stderr) of each.  With a
    multiprocessing context, the ranks' DataLoader workers start by it,
    and each rank is given its rank and world size as
    torch.multiprocessing.spawn gives them: not in RANK, WORLD_SIZE.
    The ranks meet in a file store of their own, not on a TCP port: a
    port picked free here can be taken before rank 0 binds it (CI saw
    EADDRINUSE with other tests' gloo connections beside)."""
    store = tempfile.mkdtemp(dir=out) + "/store"
    procs = []
    for r in range(world):
        env = dict(os.environ, RANK=str(r), WORLD_SIZE=str(world),
                   DDP_STORE=store, FSDP="1" if fsdp else "0")
        args = [str(mounts[r]), str(out), epochs, str(workers), str(batch)]
        if context:
            del env["RANK"], env["WORLD_SIZE"]
            args += [context, str(r), str(world)]
        procs.append(subprocess.Popen(
            [sys.executable, str(JOB)] + args, env=env,
            stderr=subprocess.PIPE, text=True))
    results = []
    for p in procs:
        try:
            _, err = p.communicate(timeout=300)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            raise AssertionError("the DDP job did not end in 300 s")
        results.append((p.returncode, err))
    return results


def lines(src: Path, shard: str) -> List[str]:
    text = (src / shard).read_text()
    return [ln + "\n" for ln in text.splitlines()]


# spawn and forkserver (Linux's default from Python 3.14): workers with
# no process group, and here no RANK or WORLD_SIZE either, read the rank
# and world of the rank that started them
@pytest.mark.parametrize("context", [None, "spawn", "forkserver"])
def test_ddp_reads_the_plan(context, data, mount, tmp_path) -> None:
    check_reads_the_plan(context, False, data, mount, tmp_path)


def test_fsdp_reads_the_plan(data, mount, tmp_path) -> None:
    """FSDP (torch.distributed.fsdp.fully_shard, FSDP2) on CPU over gloo:
    every step all-gathers parameters and reduce-scatters gradients."""
    check_reads_the_plan(None, True, data, mount, tmp_path)


def check_reads_the_plan(context, fsdp, data, mount, tmp_path) -> None:
    src = data("jsonl", 9, "4-40", seed=2)
    opts = "world=2,workers=2,batch=4,block=11"
    mounts = [mount(src, "rank=%d,%s" % (r, opts)) for r in range(2)]
    results = launch(2, mounts, tmp_path, "0,1", 2, 4, context, fsdp)
    assert [rc for rc, _ in results] == [0, 0], results
    cache: dict = {}
    for epoch in (0, 1):
        p = plan(src, opts + ",epoch=%d" % epoch)
        steps = []
        for r in range(2):
            batches = json.loads((tmp_path / ("rank%d-epoch%d.json"
                                              % (r, epoch))).read_text())
            steps.append(len(batches))
            assert all(len(b) == 4 for b in batches)
            per_worker: List[List[str]] = [[], []]
            for i, b in enumerate(batches):  # workers take turns
                per_worker[i % 2].extend(b)
            for w in range(2):
                want = []
                for shard, i in planned_samples(p, r, w):
                    if shard not in cache:
                        cache[shard] = lines(src, shard)
                    want.append(cache[shard][i])
                assert per_worker[w] == want, (epoch, r, w)
        assert steps == [2 * p["per_reader"] // 4] * 2


def test_ddp_world_2_on_a_world_4_mount_fails_at_start(data, mount, tmp_path
                                                       ) -> None:
    src = data("jsonl", 9, "4-40", seed=2)
    mnt = mount(src, "world=4,workers=2,batch=4")
    results = launch(2, [mnt, mnt], tmp_path, "0", 2, 4)
    for r, (rc, err) in enumerate(results):
        assert rc == 3, err
        assert ("rank %d: MountMismatch: Caught MountMismatch in DataLoader "
                "worker process " % r) in err
        assert ("shardfs._mount.MountMismatch: the mount %s is planned for "
                "world=4 but the job has world=2 (torch.distributed): "
                "remount with world=2, or run 4 ranks\n" % mnt) in err
    assert not list(tmp_path.glob("rank*.json"))


def test_ddp_3_workers_on_a_workers_2_mount_fails_at_start(data, mount,
                                                           tmp_path) -> None:
    src = data("jsonl", 9, "4-40", seed=2)
    mnt = mount(src, "world=2,workers=2,batch=4")
    results = launch(2, [mnt, mnt], tmp_path, "0", 3, 4)
    for r, (rc, err) in enumerate(results):
        assert rc == 3, err
        assert ("shardfs._mount.MountMismatch: the mount %s is planned for "
                "workers=2 but the DataLoader has num_workers=3: give the "
                "DataLoader num_workers=2 (0 reads a workers=1 mount), or "
                "remount with workers=3\n" % mnt) in err
    assert not list(tmp_path.glob("rank*.json"))
