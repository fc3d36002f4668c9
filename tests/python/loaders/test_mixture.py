"""A mixture of a JSONL and a Parquet source read with Hugging Face
`datasets` through the recipe of docs/loaders.md: every reader's rows are
its plan's, and each source's rows add up to exactly its allocation; and
what interleave_datasets(probabilities=...) gives instead (printed: it is
random)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from helpers import plan, planned_samples, recipe, run

OPTS = "world=2,workers=2,block=8"


@pytest.fixture(scope="module")
def mixture(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("mixture")
    run("shardfs-mkdata", str(d / "text"), "--format", "jsonl", "--shards",
        "4", "--samples", "20-60")
    run("shardfs-mkdata", str(d / "tab"), "--format", "parquet", "--shards",
        "3", "--samples", "20-60", "--seed", "1")
    for s in ("text", "tab"):
        run("shardfs-index", str(d / s), "--quiet")
    (d / "mix.json").write_text(json.dumps(
        {"sources": [{"path": "text", "proportion": 3},
                     {"path": "tab", "proportion": 1}], "epoch_size": 200}))
    return d


def offline(tmp: Path) -> None:
    os.environ["HF_DATASETS_OFFLINE"] = "1"
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["HF_HOME"] = str(tmp / "hf-home")


def source_keys(d: Path, shard: str, cache: dict) -> list:
    if shard not in cache:
        if shard.endswith(".jsonl"):
            cache[shard] = [json.loads(ln)["key"] for ln in
                            (d / shard).read_text().splitlines()]
        else:
            import pyarrow.parquet as pq
            cache[shard] = pq.read_table(d / shard).column("key").to_pylist()
    return cache[shard]


RANK_JOB = """
import json, sys
from helpers import recipe
hf_mixture = recipe("mixture_datasets").hf_mixture
# rank from RANK, as a launcher (torchrun) sets it; each worker in turn
print(json.dumps([[(s, row["key"]) for s, row in hf_mixture(sys.argv[1],
                                                              worker=w)]
                  for w in range(2)]))
"""


def test_mixture_through_datasets(mixture, mount, tmp_path) -> None:
    offline(tmp_path)
    mnt = mount(mixture / "mix.json", OPTS)
    p = plan(mixture / "mix.json", OPTS)
    status = json.loads((mnt / ".shardfs" / "status").read_text())
    allocated = {s["name"]: s["allocated"]
                 for s in status["mixture"]["sources"]}
    assert allocated == {"text": 150, "tab": 50}
    # the two ranks' processes at once, as a job's ranks read
    ranks = [subprocess.Popen([sys.executable, "-c", RANK_JOB, str(mnt)],
                              env=dict(os.environ, RANK=str(r),
                                       WORLD_SIZE="2"),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for r in range(2)]
    results = [r.communicate(timeout=300) for r in ranks]
    assert [r.returncode for r in ranks] == [0, 0], results
    total: Counter = Counter()
    cache: dict = {}
    for r, (out, _) in enumerate(results):
        per_worker = json.loads(out)
        for w in range(2):
            got = [tuple(x) for x in per_worker[w]]
            want = [(shard.split("/")[0],
                     source_keys(mixture, shard, cache)[i])
                    for shard, i in planned_samples(p, r, w)]
            assert got == want, (r, w)
            assert len(got) == p["per_reader"]
            total.update(s for s, _ in got)
    assert dict(total) == allocated


def test_interleave_datasets_is_approximate(mixture, tmp_path, capsys
                                            ) -> None:
    offline(tmp_path)
    from datasets import interleave_datasets, load_dataset
    text = load_dataset("json", data_files=sorted(
        str(f) for f in (mixture / "text").glob("*.jsonl")), split="train",
        cache_dir=str(tmp_path / "hf")).select_columns(["key"])
    tab = load_dataset("parquet", data_files=sorted(
        str(f) for f in (mixture / "tab").glob("*.parquet")), split="train",
        cache_dir=str(tmp_path / "hf")).select_columns(["key"])
    text = text.add_column("source", ["text"] * len(text))
    tab = tab.add_column("source", ["tab"] * len(tab))
    counts = []
    for seed in (0, 1, 2):
        mixed = interleave_datasets([text, tab], probabilities=[0.75, 0.25],
                                    seed=seed,
                                    stopping_strategy="all_exhausted")
        c = Counter(mixed.select(range(200))["source"])
        counts.append("seed %d: %d : %d" % (seed, c["text"], c["tab"]))
        assert c["text"] + c["tab"] == 200
    with capsys.disabled():
        print("\ninterleave_datasets(probabilities=[0.75, 0.25]), first 200:",
              "; ".join(counts))
