"""python -m shardfs status MNT: what a mount serves."""
from __future__ import annotations

import argparse
import sys
from typing import List, Optional

from ._mount import Mount, ShardfsError, _ranges


def status(mnt: str) -> str:
    m = Mount(mnt)
    s = m.status
    o = m.options
    plan = s["plan"]
    out: List[str] = []
    out.append("%s: source %s" % (m.path, s.get("source")))
    out.append("epoch %d  world=%d workers=%d batch=%d  ranks %s"
               % (m.epoch, m.world, m.workers, m.batch, _ranges(m.ranks)))
    out.append("options: " + ",".join(
        "%s=%s" % (k, o[k]) for k in ("seed", "shuffle", "block",
                                      "remainder", "partition", "start",
                                      "replicas", "epoch_size") if k in o))
    idx = s.get("index_summary") or {}
    if idx:
        out.append("index: %s shards, %s samples, %s bytes"
                   % (idx.get("shards"), idx.get("samples"), idx.get("bytes")))
    out.append("per reader: %d samples (%d steps of batch %d per worker); "
               "padding %d, dropped %d"
               % (m.per_reader, m.per_reader // max(m.batch, 1), m.batch,
                  plan.get("padding", 0), plan.get("dropped", 0)))
    for r in plan.get("readers", []):
        out.append("  %d/%d: %d samples (%d padding) in %d files"
                   % (r["rank"], r["worker"], r["samples"], r["padding"],
                      r["files"]))
    return "\n".join(out)


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m shardfs",
                                description="Inspect a mounted shardfs view.")
    sub = p.add_subparsers(dest="cmd", required=True)
    st = sub.add_parser("status", help="what the mount serves")
    st.add_argument("mnt", help="the mount point")
    a = p.parse_args(argv)
    try:
        print(status(a.mnt))
    except ShardfsError as e:
        print("shardfs: %s" % e, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
