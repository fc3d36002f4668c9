"""A source that grows (follow=1, docs/follow.md): a reader's windows, and
the acknowledgements that move consumption.

The daemon counts a window as taken by a reader only when that reader says
so: `acknowledge` writes "RANK WORKER WINDOW\\n" to MNT/.shardfs/ack.
Reads never consume (an auditor's or another user's reads must not let
the producer delete what the job has not read).  `windows` does it for a
loader that reads window files::

    from shardfs import follow
    for path in follow.windows("/mnt/data", rank, worker):
        train_on(path)            # acknowledged when the next is asked for

Only the standard library.
"""
from __future__ import annotations

import json
import os
import time
import urllib.parse
from typing import Any, Dict, Iterator, Optional

from ._mount import ShardfsError


def acknowledge(mnt: str, rank: int, worker: int, window: int) -> None:
    """Tell the daemon of MNT that reader (rank, worker) has taken every
    window up to WINDOW.  Acknowledging a window again changes nothing.
    Raises ShardfsError when the daemon refuses it (a reader the mount
    does not serve, a window not complete: its log says which)."""
    path = os.path.join(mnt, ".shardfs", "ack")
    line = b"%d %d %d\n" % (rank, worker, window)
    try:
        fd = os.open(path, os.O_WRONLY)
    except OSError as e:
        raise ShardfsError(
            "%s: cannot open it to acknowledge window %d of rank %d worker "
            "%d (%s): is %s a follow=1 mount of this version, and is this "
            "process its owner?" % (path, window, rank, worker, e.strerror,
                                    mnt)) from e
    try:
        os.write(fd, line)
    except OSError as e:
        raise ShardfsError(
            "%s: the daemon refused %r (%s): a rank and worker the mount "
            "serves and a complete window are needed; the daemon's log says "
            "which" % (path, line.decode(), e.strerror)) from e
    finally:
        os.close(fd)


def shard_name(name: str) -> str:
    """A shard name as the status and progress files write it (%XX escapes,
    docs/follow.md) as a file name for os functions (os.fsdecode)."""
    return os.fsdecode(urllib.parse.unquote_to_bytes(name))


def status(mnt: str) -> Dict[str, Any]:
    """MNT/.shardfs/status of a follow=1 mount, parsed."""
    path = os.path.join(mnt, ".shardfs", "status")
    try:
        with open(path, encoding="utf-8") as f:
            st = json.load(f)
    except (OSError, ValueError) as e:
        raise ShardfsError("%s: cannot read it (%s): is %s a shardfs "
                           "mount?" % (path, e, mnt)) from e
    if not isinstance(st.get("follow"), dict):
        raise ShardfsError("%s: not a follow=1 mount (mount with "
                           "follow=1, docs/follow.md)" % mnt)
    return st


def windows(mnt: str, rank: int, worker: int, poll: float = 0.2,
            timeout: Optional[float] = None) -> Iterator[str]:
    """The paths of reader (rank, worker)'s window files, in order, each
    once it is complete (waiting, polling every POLL seconds, at most
    TIMEOUT seconds for one: None waits as long as it takes).  A window is
    acknowledged when the caller asks for the next one (it has taken it),
    the last when the iteration ends: the stream complete and every window
    given.  A caller that stops early acknowledges nothing more."""
    st = status(mnt)
    fo = st["follow"]
    ext = fo["format"]
    d = os.path.join(mnt, str(rank), str(worker))
    k = fo["first_window"]
    taken: Optional[int] = None
    since = time.monotonic()
    while True:
        path = os.path.join(d, "window-%08d.%s" % (k, ext))
        if os.path.exists(path):
            if taken is not None:
                acknowledge(mnt, rank, worker, taken)
            yield path
            taken = k
            k += 1
            since = time.monotonic()
            continue
        fo = status(mnt)["follow"]
        if fo["complete"] and k >= fo["first_window"] + fo["windows"]:
            break
        if timeout is not None and time.monotonic() - since > timeout:
            raise ShardfsError(
                "%s: window %d not complete after %g s (the stream holds "
                "%d samples, last shard %s)" % (d, k, timeout, fo["samples"],
                                                fo["last_shard"]))
        time.sleep(poll)
    if taken is not None:
        acknowledge(mnt, rank, worker, taken)
