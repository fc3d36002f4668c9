"""Fixtures of the Python suites: data made by shardfs-mkdata, indexed,
mounted for real by the daemon, and the plan `shardfs-plan --json` says
each reader reads.

Every mount made through the `mount` fixture is unmounted (by its path)
when the test ends, whatever way it ends, and its daemon must exit 0.
tests/python/run.sh puts the build's programs on PATH.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Tuple

import pytest

from helpers import run



@pytest.fixture(scope="session")
def data(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., Path]:
    """data(format, shards, samples, seed=0): an indexed dataset made by
    shardfs-mkdata (made once per session per arguments)."""
    made: Dict[Tuple[Any, ...], Path] = {}

    def make(fmt: str, shards: int, samples: str, seed: int = 0) -> Path:
        key = (fmt, shards, samples, seed)
        if key not in made:
            d = tmp_path_factory.mktemp("%s-%d" % (fmt, shards))
            run("shardfs-mkdata", str(d), "--format", fmt, "--shards",
                str(shards), "--samples", samples, "--seed", str(seed))
            run("shardfs-index", str(d), "--quiet")
            made[key] = d
        return made[key]

    return make


class Mounted:
    def __init__(self, proc: "subprocess.Popen[bytes]", path: Path,
                 log: Path) -> None:
        self.proc, self.path, self.log = proc, path, log


@pytest.fixture
def mount(tmp_path: Path) -> Iterator[Callable[..., Path]]:
    """mount(src, opts) -> the mount point: the daemon in the foreground
    until the test ends; then unmounted by path, and it must exit 0."""
    mounted: List[Mounted] = []

    def do(src: Path, opts: str) -> Path:
        mnt = tmp_path / ("mnt%d" % len(mounted))
        mnt.mkdir()
        log = tmp_path / ("daemon%d.log" % len(mounted))
        with open(log, "wb") as err:
            proc = subprocess.Popen(["shardfs", str(src), str(mnt), "-f",
                                     "-o", opts], stderr=err)
        mounted.append(Mounted(proc, mnt, log))
        deadline = time.monotonic() + 30
        while not os.path.ismount(mnt):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError("shardfs %s %s -o %s did not mount:\n%s"
                                     % (src, mnt, opts, log.read_text()))
            time.sleep(0.02)
        return mnt

    yield do
    errors = []
    for m in reversed(mounted):
        if os.path.ismount(m.path):
            if subprocess.run(["fusermount3", "-u", str(m.path)]).returncode:
                subprocess.run(["umount", "-l", str(m.path)])
        try:
            rc = m.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            m.proc.kill()
            rc = m.proc.wait()
        if rc != 0:
            errors.append("daemon on %s exited %d:\n%s"
                          % (m.path, rc, m.log.read_text()))
    assert not errors, "\n".join(errors)


@pytest.fixture
def venv_python() -> str:
    """The interpreter of the suite's environment (for child jobs)."""
    return sys.executable
