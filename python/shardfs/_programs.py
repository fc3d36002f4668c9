"""The wheel's console scripts: each runs its program from shardfs/_bin
(the wheel bundles them there) in place of this Python process, with the
same arguments, so that `shardfs --help` in a venv is the daemon's own."""
from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import NoReturn, Optional

BIN = Path(__file__).resolve().parent / "_bin"


def find(name: str) -> Optional[str]:
    """The path of program `name`: the one the wheel bundles, else the
    first on PATH (a checkout's package next to a .deb or a build), else
    None."""
    bundled = BIN / name
    if os.access(bundled, os.X_OK):
        return str(bundled)
    return shutil.which(name)


def run(name: str, args: "list[str]") -> NoReturn:
    """Run program `name` with `args` in place of this process: the
    wheel's own, else the one on PATH (python -m shardfs from the sources
    of a checkout, next to a build or the Debian package)."""
    prog = find(name)
    if prog is None:
        sys.stderr.write("%s: not found: this shardfs package has no "
                         "programs bundled (it was installed from the Python "
                         "sources alone) and there is no %s on PATH; install "
                         "the wheel (pip install ./python in a shardfs "
                         "checkout) or the Debian package\n" % (name, name))
        sys.exit(127)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(prog, [name] + list(args))


def _run(name: str) -> NoReturn:
    run(name, sys.argv[1:])


def shardfs() -> NoReturn:
    _run("shardfs")


def shardfs_index() -> NoReturn:
    _run("shardfs-index")


def shardfs_plan() -> NoReturn:
    _run("shardfs-plan")


def shardfs_check() -> NoReturn:
    _run("shardfs-check")


def shardfs_mkdata() -> NoReturn:
    _run("shardfs-mkdata")
