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


class Mounter:
    """Mounts made by the daemon in the foreground, unmounted by path by
    close(), which fails unless every daemon exited 0."""

    def __init__(self, where: Path) -> None:
        self.where = where
        self.mounted: List[Tuple["subprocess.Popen[bytes]", Path, Path]] = []

    def __call__(self, src: Path, opts: str) -> Path:
        n = len(self.mounted)
        mnt = self.where / ("mnt%d" % n)
        mnt.mkdir()
        log = self.where / ("daemon%d.log" % n)
        with open(log, "wb") as err:
            proc = subprocess.Popen(["shardfs", str(src), str(mnt), "-f",
                                     "-o", opts], stderr=err)
        self.mounted.append((proc, mnt, log))
        deadline = time.monotonic() + 30
        while not os.path.ismount(mnt):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError("shardfs %s %s -o %s did not mount:\n%s"
                                     % (src, mnt, opts, log.read_text()))
            time.sleep(0.02)
        return mnt

    def close(self) -> None:
        errors = []
        for proc, mnt, log in reversed(self.mounted):
            if os.path.ismount(mnt):
                if subprocess.run(["fusermount3", "-u", str(mnt)]).returncode:
                    subprocess.run(["umount", "-l", str(mnt)])
            try:
                rc = proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                rc = proc.wait()
            if rc != 0:
                errors.append("daemon on %s exited %d:\n%s"
                              % (mnt, rc, log.read_text()))
        self.mounted = []
        assert not errors, "\n".join(errors)


@pytest.fixture
def mount(tmp_path: Path) -> Iterator[Mounter]:
    """mount(src, opts) -> the mount point: the daemon in the foreground
    until the test ends; then unmounted by path, and it must exit 0."""
    m = Mounter(tmp_path)
    try:
        yield m
    finally:
        m.close()


@pytest.fixture(scope="module")
def module_mount(tmp_path_factory: pytest.TempPathFactory
                 ) -> Iterator[Mounter]:
    """mount(), for the tests of a module."""
    m = Mounter(tmp_path_factory.mktemp("mounts"))
    try:
        yield m
    finally:
        m.close()


@pytest.fixture
def venv_python() -> str:
    """The interpreter of the suite's environment (for child jobs)."""
    return sys.executable
