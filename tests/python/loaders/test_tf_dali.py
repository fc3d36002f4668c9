"""tf.data (tensorflow-cpu) and NVIDIA DALI (CPU pipelines) through the
recipes of docs/loaders.md, in the environment of
tests/python/requirements-tf-dali.txt (tf_dali_job.py runs there): every
rank of a workers=1 mount runs the same number of full batches, and all
ranks' samples are exactly the plan's, in order.  An environment that
does not install fails the test."""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path
from typing import Any, Dict, List

import pytest

import shardfs
from helpers import plan, planned_samples, run

TESTS = Path(__file__).resolve().parent.parent.parent
JOB = Path(__file__).with_name("tf_dali_job.py")


@pytest.fixture(scope="module")
def tf_python() -> str:
    p = subprocess.run(["bash", str(TESTS / "python" / "venv.sh"),
                        str(TESTS / "python" / "requirements-tf-dali.txt")],
                       capture_output=True, text=True)
    assert p.returncode == 0, "tf/DALI environment:\n" + p.stderr[-3000:]
    return p.stdout.strip() + "/bin/python"


def job(py: str, *args: str) -> Dict[str, Any]:
    env = dict(os.environ, PYTHONPATH="%s:%s" % (TESTS / "python",
                                                 TESTS.parent / "python"),
               TF_CPP_MIN_LOG_LEVEL="2")
    env["PATH"] = str(Path(py).parent) + ":" + env["PATH"]  # tfrecord2idx
    p = subprocess.run([py, str(JOB)] + list(args), capture_output=True,
                       text=True, env=env, timeout=600)
    assert p.returncode == 0, "tf_dali_job.py %s:\n%s" % (
        " ".join(args), p.stderr[-3000:])
    lines = p.stdout.strip().splitlines()
    return json.loads(lines[-1]) if lines else {}


def sha(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


def check_ranks(per_rank: List[List[list]], want: List[list], batch: int
                ) -> None:
    """Every rank the same number of batches, all full; each rank's
    samples its plan's, in order."""
    assert len({len(b) for b in per_rank}) == 1, [len(b) for b in per_rank]
    for r, batches in enumerate(per_rank):
        assert all(len(b) == batch for b in batches)
        assert [s for b in batches for s in b] == want[r], "rank %d" % r


def source_samples(src: Path, p: Dict[str, Any], rank: int, read) -> list:
    cache: Dict[str, list] = {}
    out = []
    for shard, i in planned_samples(p, rank, 0):
        if shard not in cache:
            cache[shard] = list(read(src / shard))
        out.append(cache[shard][i])
    return out


def test_tf_data(tf_python, data, mount) -> None:
    src = data("tfrecord", 5, "5-30", seed=3)
    opts = "world=2,workers=1,batch=4,block=5"
    mnt = mount(src, opts)
    p = plan(src, opts)
    got = [job(tf_python, "tfdata", str(mnt), str(r))["batches"]
           for r in range(2)]
    want = [[sha(s) for s in source_samples(src, p, r,
                                            shardfs.samples)]
            for r in range(2)]
    check_ranks(got, want, 4)


def test_dali_webdataset(tf_python, tmp_path, mount) -> None:
    src = tmp_path / "tars"
    run("shardfs-mkdata", str(src), "--format", "tar", "--shards", "5",
        "--samples", "5-30", "--members", "3", "--seed", "5")
    run("shardfs-index", str(src), "--quiet")
    opts = "world=2,workers=1,batch=4,block=6,remainder=drop"
    mnt = mount(src, opts)
    p = plan(src, opts)
    got = [job(tf_python, "webdataset", str(mnt), str(r))["batches"]
           for r in range(2)]
    want = [[sha(s["jpg"]) for s in source_samples(src, p, r,
                                                   shardfs.samples)]
            for r in range(2)]
    check_ranks(got, want, 4)


def test_dali_file_reader(tf_python, tmp_path, mount) -> None:
    src = tmp_path / "folder"
    run("shardfs-mkdata", str(src), "--format", "files", "--shards", "3",
        "--samples", "6-20", "--members", "3", "--seed", "6")
    run("shardfs-index", str(src), "--format", "files", "--quiet")
    classes = sorted(n for n in os.listdir(src) if not n.startswith("."))
    opts = "world=2,workers=1,batch=4,remainder=drop"
    mnt = mount(src, opts)
    p = plan(src, opts)
    got, want, seen = [], [], set()
    for r in range(2):
        out = job(tf_python, "files", str(mnt), str(r), ",".join(classes))
        got.append(out["batches"])
        # the files DALI was given: the view's .jpg files in sequence order
        # (one per sample), each the source's file
        files = [Path(f) for f in out["files"]]
        assert len(files) == p["per_reader"]
        want.append([[sha(f.read_bytes()),
                      classes.index(f.parent.name)] for f in files])
        seen.update(os.path.realpath(f) for f in files)
    check_ranks(got, want, 4)
    jpgs = {str(f) for f in src.rglob("*.jpg")}
    assert seen <= jpgs and len(seen) == p["remaining"] - p["dropped"]


def test_dali_tfrecord(tf_python, tmp_path, mount) -> None:
    src = tmp_path / "examples"
    job(tf_python, "examples", str(src), "7", "13", "22", "9", "16")
    run("shardfs-index", str(src), "--quiet")
    opts = "world=2,workers=1,batch=4,block=5,shuffle=samples"
    mnt = mount(src, opts)
    p = plan(src, opts)
    got = [job(tf_python, "tfrecord", str(mnt), str(r),
               str(tmp_path / ("idx%d" % r)))["batches"] for r in range(2)]
    want = [["%s_%06d" % (shard.split("-")[1].split(".")[0], i)
             for shard, i in planned_samples(p, r, 0)] for r in range(2)]
    check_ranks(got, want, 4)
