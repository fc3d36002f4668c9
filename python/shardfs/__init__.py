"""shardfs: the Python front end of a mounted shardfs view.

    import shardfs
    m = shardfs.mount("/data/train", "/mnt/data", world=2, workers=2)
    # or a view mounted by other means: m = shardfs.Mount("/mnt/data")
    m.check_job()                    # world, workers, batch, rank
    m.set_epoch(3)                   # returns once epoch 3 is served
    files = m.files()                # this reader's files, in order

Only the standard library is imported here.  The integrations import
their framework when used: `shardfs.ShardfsDataset` (PyTorch, also
`shardfs.pytorch`), `shardfs.ShardfsEpoch` (Lightning, also
`shardfs.lightning`).  The plan is the daemon's; nothing here computes one.
`shardfs.mount` runs the daemon the wheel bundles (or `shardfs` on PATH).
"""
from typing import Any

from ._daemon import MountedView, mount
from ._mount import (Mount, MountMismatch, ShardfsError, job_rank, job_world,
                     resume_start)
from ._release import __version__
from .samples import samples
from . import follow  # follow=1: windows, acknowledge (docs/follow.md)

__all__ = ["Mount", "MountMismatch", "MountedView", "ShardfsError", "job_rank",
           "job_world", "mount", "resume_start", "samples", "follow",
           "ShardfsDataset", "ShardfsEpoch", "__version__"]


def __getattr__(name: str) -> Any:
    if name == "ShardfsDataset":
        from .pytorch import ShardfsDataset
        return ShardfsDataset
    if name == "ShardfsEpoch":
        from .lightning import ShardfsEpoch
        return ShardfsEpoch
    raise AttributeError("module 'shardfs' has no attribute %r" % name)
