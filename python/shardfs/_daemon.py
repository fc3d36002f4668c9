"""shardfs.mount(): start the daemon on a mount point and return the view.

The daemon is the wheel's own (shardfs/_bin/shardfs), else the first
`shardfs` on PATH (a Debian package, a build).  It runs as `shardfs SRC
MNT -o OPTIONS` does from a shell: it checks the options against its own
table, loads the index, mounts, and only then forks into the background
and its first process exits 0; any failure before that is its message on
stderr and exit status 1.  So its exit is the readiness: the view is
mounted when it returns 0, and the `.shardfs/status` read by Mount()
after it is served by the running daemon.  `close()` unmounts the path
it mounted with `fusermount3 -u`, upon which the daemon exits by itself;
no process is ever signalled.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, List, Optional, Union

from ._mount import Mount, ShardfsError
from ._programs import find
from ._release import __version__

PathLike = Union[str, "os.PathLike[str]"]


def _option_list(flags: "tuple[str, ...]", options: "dict[str, Any]") -> str:
    """The daemon's -o list: the bare flags, then name=value (True and
    False as 1 and 0).  A comma would start an option of its own inside
    a value (an index path "x,allow_other"): refused here."""
    words: List[str] = []
    for f in flags:
        if not isinstance(f, str) or not f or "," in f:
            raise ShardfsError("shardfs.mount: flag %r: give one option word "
                               "per argument (\"allow_other\")" % (f,))
        words.append(f)
    for name, value in options.items():
        if isinstance(value, bool):
            value = int(value)
        text = str(value)
        if "," in text:
            raise ShardfsError(
                "shardfs.mount: %s=%r holds a comma, which would end the "
                "option and start another: give a value without one"
                % (name, text))
        words.append("%s=%s" % (name, text))
    return ",".join(words)


def daemon_program() -> str:
    """The daemon mount() runs: the wheel's, else shardfs on PATH."""
    prog = find("shardfs")
    if prog is None:
        raise ShardfsError(
            "shardfs.mount: no shardfs daemon: this package has none bundled "
            "(installed from the Python sources alone) and there is no "
            "shardfs on PATH; install the wheel (pip install ./python in a "
            "shardfs checkout) or the Debian package")
    return prog


def daemon_version(prog: str) -> str:
    """The release of daemon `prog`, from `prog --version`."""
    try:
        out = subprocess.run([prog, "--version"], stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, check=False,
                             timeout=60).stdout.decode(errors="replace")
    except OSError as e:
        raise ShardfsError("shardfs.mount: cannot run %s: %s"
                           % (prog, e.strerror)) from None
    m = re.match(r"shardfs (\S+)", out)
    if not m:
        raise ShardfsError("shardfs.mount: %s --version printed %r, not "
                           "\"shardfs VERSION\": it is not the shardfs "
                           "daemon; install the wheel (pip install ./python "
                           "in a shardfs checkout)" % (prog, out.strip()))
    return m.group(1)


def check_release(prog: str) -> None:
    """Refuse a daemon of another release than this package: the control
    files' documents it serves are those of its own release."""
    v = daemon_version(prog)
    if v != __version__:
        raise ShardfsError(
            "shardfs.mount: %s is shardfs %s but this Python package is %s: "
            "the package reads the status of its own release only; install "
            "the wheel (pip install ./python in a shardfs checkout: it "
            "bundles its daemon), or put a shardfs %s daemon first on PATH"
            % (prog, v, __version__, __version__))


class MountedView(Mount):
    """A view that shardfs.mount() mounted: a shardfs.Mount that unmounts
    its path on close() or at the end of a `with` block."""

    def __init__(self, path: PathLike) -> None:
        self.closed = False
        super().__init__(path)

    def __enter__(self) -> "MountedView":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self, lazy: bool = False) -> None:
        """Unmount the view (`fusermount3 -u PATH`); the daemon exits by
        itself.  A view still in use (a process has a file open or its
        working directory there) is not unmounted and ShardfsError says
        so, unless `lazy`: then it goes once the last user lets go."""
        if self.closed:
            return
        _unmount(str(self.path), lazy)
        self.closed = True


def _mounted(path: str) -> bool:
    """Whether `path` is a mount point in this mount namespace."""
    esc = (path.replace("\\", "\\134").replace(" ", "\\040")
           .replace("\t", "\\011").replace("\n", "\\012"))
    try:
        with open("/proc/self/mountinfo", encoding="utf-8",
                  errors="replace") as f:
            return any(line.split(" ")[4] == esc for line in f)
    except OSError:
        return os.path.ismount(path)


def _unmount(path: str, lazy: bool) -> None:
    cmd = ["fusermount3", "-u"] + (["-z"] if lazy else []) + [path]
    try:
        r = subprocess.run(cmd, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, check=False)
    except OSError as e:
        raise ShardfsError("cannot run fusermount3 to unmount %s: %s: "
                           "install fuse3 (apt-get install fuse3)"
                           % (path, e.strerror)) from None
    if r.returncode != 0:
        msg = r.stdout.decode(errors="replace").strip()
        if "/etc/mtab" in msg:
            hint = ("fusermount3 needs /etc/mtab to unmount as a user: "
                    "create it once, as root: ln -s ../proc/self/mounts "
                    "/etc/mtab")
        elif "busy" in msg:
            hint = ("close the files and leave the directories that use "
                    "it, or close(lazy=True)")
        else:
            hint = "unmount it with fusermount3 -u %s" % path
        raise ShardfsError("%s: the view is not unmounted: %s (%s)"
                           % (path, msg, hint))


def mount_list(source: PathLike, mountpoint: PathLike, optlist: str,
               check_version: bool = True) -> MountedView:
    """mount() with the daemon's -o list as it is written on the command
    line (python -m shardfs mount)."""
    prog = daemon_program()
    if check_version:
        check_release(prog)
    # absolute: the daemon works from / once in the background
    src = os.path.abspath(os.fspath(source))
    mnt = os.path.realpath(os.fspath(mountpoint))
    cmd = [prog, src, mnt] + (["-o", optlist] if optlist else [])
    try:
        r = subprocess.run(cmd, stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           check=False)
    except OSError as e:
        raise ShardfsError("shardfs.mount: cannot run %s: %s"
                           % (prog, e.strerror)) from None
    err = r.stderr.decode(errors="replace").strip()
    if r.returncode != 0:
        if not err:
            err = "%s exited with status %d" % (prog, r.returncode)
        raise ShardfsError(err)
    if err:  # the daemon's warnings (an index built in memory, say)
        print(err, file=sys.stderr)
    if not _mounted(mnt):
        raise ShardfsError("shardfs.mount: %s exited 0 but %s is not a "
                           "mount point" % (prog, mnt))
    try:
        return MountedView(mnt)
    except BaseException:
        try:
            _unmount(mnt, True)
        except ShardfsError:
            pass  # the error that matters is the one raised above
        raise


def mount(source: PathLike, mountpoint: PathLike, *flags: str,
          **options: Any) -> MountedView:
    """Mount the view of `source` (a dataset directory or a mixture file)
    on the existing directory `mountpoint` and return it, once served, as a
    shardfs.Mount that unmounts on close() or at the end of a `with` block.

        with shardfs.mount("/data/train", "/mnt/data", world=2,
                           workers=2) as m:
            files = m.files(rank=0, worker=1)

    `options` are the daemon's -o options (`shardfs --help`): name=value,
    True and False as 1 and 0; `flags` are bare words such as
    "allow_other".  The daemon checks them: an unknown or misspelt one,
    a bad value, a source without an index, a mount point that cannot be
    mounted raise ShardfsError with the daemon's own message.  The daemon
    is the wheel's own, else `shardfs` on PATH, and must be of this
    package's release.
    """
    return mount_list(source, mountpoint, _option_list(flags, options))
