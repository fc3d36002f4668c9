"""Lightning: a callback that switches a mount's epoch at the start of
every training epoch.

Importing this module imports Lightning: `lightning.pytorch` when the
program imported it (or when it is the one installed), else
`pytorch_lightning`.  The callback must come from the package the Trainer
comes from.
"""
from __future__ import annotations

import os
import sys
from typing import Any, Optional, Union

from ._mount import Mount, job_rank

if "lightning.pytorch" in sys.modules or "pytorch_lightning" not in sys.modules:
    try:
        from lightning.pytorch import Callback
    except ImportError:
        from pytorch_lightning import Callback
else:
    from pytorch_lightning import Callback


class ShardfsEpoch(Callback):
    """Serve `trainer.current_epoch + offset` on the mount at the start of
    each training epoch (and so, on a run resumed from a checkpoint, the
    resumed epoch), before the epoch's DataLoader workers list their
    directories.

    Once per mount: the lowest rank of the job that the mount serves
    writes the epoch; every other rank reading that mount waits until the
    mount serves it.  With one mount per node (`rank=` the node's ranks,
    or no `rank=` on a single node) that is the node's first rank; with
    one mount per rank (`rank=r`, a daemon each) every rank switches its
    own.  No collective call is made: a rank never waits for another
    rank, only for its mount.

    Give the Trainer `use_distributed_sampler=False` (Lightning 1.x:
    `replace_sampler_ddp=False`) so that the view is not split again."""

    def __init__(self, mount: Union[Mount, str, "os.PathLike[str]"],
                 offset: int = 0, timeout: float = 600.0) -> None:
        super().__init__()
        self.mount = mount if isinstance(mount, Mount) else Mount(mount)
        self.offset = offset
        self.timeout = timeout

    def _writes(self, trainer: Any) -> bool:
        rank = int(getattr(trainer, "global_rank", job_rank()))
        world = int(getattr(trainer, "world_size", 1))
        served = [r for r in self.mount.ranks if r < world]
        return not served or rank == min(served)

    def switch(self, trainer: Any) -> None:
        epoch = int(trainer.current_epoch) + self.offset
        if self._writes(trainer):
            self.mount.set_epoch(epoch, timeout=self.timeout)
        else:
            self.mount.wait_epoch(epoch, timeout=self.timeout)

    def on_train_epoch_start(self, trainer: Any, pl_module: Any) -> None:
        self.switch(trainer)


def epoch_callback(mount: Union[Mount, str, "os.PathLike[str]"],
                   offset: int = 0, timeout: Optional[float] = None
                   ) -> ShardfsEpoch:
    """ShardfsEpoch(mount, offset)."""
    return ShardfsEpoch(mount, offset, 600.0 if timeout is None else timeout)
