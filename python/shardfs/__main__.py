"""python -m shardfs: the wheel's programs and the Python API from a shell.

    python -m shardfs mount SRC MNT [-o OPTIONS]  mount a view (shardfs.mount)
    python -m shardfs unmount MNT                 fusermount3 -u MNT
    python -m shardfs status MNT                  what a mount serves
    python -m shardfs index|plan|check|mkdata ARGS...
                                      shardfs-index ARGS... (the wheel's)
"""
from __future__ import annotations

import argparse
import sys
from typing import List, Optional

from ._daemon import _unmount, mount_list
from ._mount import Mount, ShardfsError, _ranges
from ._programs import run
from ._release import __version__

TOOLS = ("index", "plan", "check", "mkdata")


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
    args = sys.argv[1:] if argv is None else argv
    # the tools take their own arguments, --help included
    if args and args[0] in TOOLS:
        run("shardfs-" + args[0], args[1:])
    p = argparse.ArgumentParser(
        prog="python -m shardfs",
        description="Mount, inspect and unmount shardfs views; "
        "`python -m shardfs index|plan|check|mkdata ARGS` runs "
        "shardfs-index ... with ARGS.")
    p.add_argument("-V", "--version", action="version",
                   version="shardfs %s (Python package)" % __version__)
    sub = p.add_subparsers(dest="cmd", required=True)
    mo = sub.add_parser("mount", help="mount a view (shardfs.mount): the "
                        "daemon keeps serving it after this command returns")
    mo.add_argument("src", help="the dataset directory or mixture file")
    mo.add_argument("mnt", help="the mount point (an existing directory)")
    mo.add_argument("-o", dest="options", default="",
                    help="the daemon's options, as for `shardfs SRC MNT -o "
                    "OPTIONS` (see shardfs --help)")
    um = sub.add_parser("unmount", help="unmount a view (fusermount3 -u)")
    um.add_argument("mnt", help="the mount point")
    st = sub.add_parser("status", help="what the mount serves")
    st.add_argument("mnt", help="the mount point")
    for t in TOOLS:
        sub.add_parser(t, help="run shardfs-%s with the arguments that "
                       "follow" % t)
    a = p.parse_args(args)
    try:
        if a.cmd == "mount":
            m = mount_list(a.src, a.mnt, a.options)
            print(status(str(m.path)))
        elif a.cmd == "unmount":
            _unmount(a.mnt, False)
        else:
            print(status(a.mnt))
    except ShardfsError as e:
        msg = str(e)
        print(msg if msg.startswith("shardfs") else "shardfs: " + msg,
              file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
