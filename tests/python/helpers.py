"""Helpers of the Python suites: the plan shardfs-plan computes, and the
samples it gives each reader."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any, Dict, Iterator, List, Tuple


def run(*cmd: str) -> str:
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise AssertionError("%s exited %d:\n%s" % (" ".join(cmd),
                                                    p.returncode, p.stderr))
    return p.stdout


def plan(src: Path, opts: str) -> Dict[str, Any]:
    """shardfs-plan SRC -o OPTS --json."""
    return json.loads(run("shardfs-plan", str(src), "-o", opts, "--json"))


def reader_runs(p: Dict[str, Any], rank: int, worker: int
                ) -> List[Dict[str, Any]]:
    """The files of one reader in a plan."""
    for r in p["readers"]:
        if (r["rank"], r["worker"]) == (rank, worker):
            return r["files"]
    raise LookupError("no reader %d/%d in the plan" % (rank, worker))


def planned_samples(p: Dict[str, Any], rank: int, worker: int
                    ) -> Iterator[Tuple[str, int]]:
    """(shard, sample number) of every sample one reader reads, in order."""
    for f in reader_runs(p, rank, worker):
        for first, count in f["runs"]:
            for i in range(first, first + count):
                yield f["shard"], i



DOC = Path(__file__).resolve().parent.parent.parent / "docs" / "loaders.md"


def recipe(name: str) -> Any:
    """The ```python block of docs/loaders.md whose first line is
    `# recipe: NAME`, run in a fresh module (the code a user copies)."""
    import re
    import types
    text = DOC.read_text()
    code = [body for found, body in
            re.findall(r"```python\n# recipe: (\w+)\n(.*?)```", text, re.S)
            if found == name]
    if len(code) != 1:
        raise LookupError("docs/loaders.md has %d recipes named %s"
                          % (len(code), name))
    module = types.ModuleType("recipe_" + name)
    module.__file__ = str(DOC)
    exec(compile(code[0], "%s (recipe %s)" % (DOC, name), "exec"),
         module.__dict__)
    return module


def sql_recipe(name: str) -> str:
    """The ```sql block of docs/loaders.md whose first line is
    `-- recipe: NAME`."""
    import re
    found = re.findall(r"```sql\n-- recipe: %s\n(.*?)```" % re.escape(name),
                       DOC.read_text(), re.S)
    if len(found) != 1:
        raise LookupError("docs/loaders.md has %d SQL recipes named %s"
                          % (len(found), name))
    return found[0]
