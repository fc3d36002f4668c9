"""Lightning: a callback that switches a mount's epoch before each
training epoch's DataLoader iterator is made, and keeps every rank's
DataLoader state in a checkpoint.

Importing this module imports Lightning: `lightning.pytorch` when the
program imported it (or when it is the one installed), else
`pytorch_lightning`.  The callback must come from the package the Trainer
comes from.
"""
from __future__ import annotations

import os
import sys
from typing import Any, Dict, List, Optional, Union

from ._mount import Mount, _torch_dist, job_rank

if "lightning.pytorch" in sys.modules or "pytorch_lightning" not in sys.modules:
    try:
        from lightning.pytorch import Callback
    except ImportError:
        from pytorch_lightning import Callback
else:
    from pytorch_lightning import Callback


class ShardfsEpoch(Callback):
    """Serve `trainer.current_epoch + offset` on the mount before each
    training epoch's DataLoader iterator is made (its workers list their
    directories when it starts), the first epoch of a `fit` included, and
    so, on a run resumed from a checkpoint, the resumed epoch.

    Lightning 2.1 makes the first epoch's iterator in FitLoop.setup_data,
    before on_train_epoch_start and after every callback hook of the fit's
    start; the loops' state of a checkpoint is restored after on_fit_start.
    So the first epoch is switched in on_fit_start, or, resuming, in
    on_load_checkpoint: the epoch the fit loop will run first, read from
    the checkpoint's loop state.  Every later epoch is switched in
    on_train_epoch_start: Lightning makes its iterator after that hook.

    Once per mount: the lowest rank of the job that the mount serves
    writes the epoch; every other rank reading that mount waits until the
    mount serves it.  With one mount per node (`rank=` the node's ranks,
    or no `rank=` on a single node) that is the node's first rank; with
    one mount per rank (`rank=r`, a daemon each) every rank switches its
    own.  The switch makes no collective call: a rank never waits for
    another rank, only for its mount.

    Give the Trainer `use_distributed_sampler=False` (Lightning 1.x:
    `replace_sampler_ddp=False`) so that the view is not split again.

    And every rank's DataLoader state, for a fit resumed mid-epoch (a
    StatefulDataLoader over ShardfsDataset): Lightning puts the loader's
    state in the checkpoint's loop state, but only rank 0 writes the
    checkpoint, so every rank would resume from rank 0's place.  In
    on_save_checkpoint (which every rank runs) the ranks' loader states
    are gathered (torch.distributed.all_gather_object) into the
    checkpoint's "shardfs_loader_states", one per rank; in
    on_load_checkpoint, before Lightning restores its loops, each rank
    puts its own back in the loop state.  A checkpoint of another world
    size restores no loader state: each loader reads its view from the
    start (a mount remounted with start= Mount.resume_start(steps))."""

    def __init__(self, mount: Union[Mount, str, "os.PathLike[str]"],
                 offset: int = 0, timeout: float = 600.0) -> None:
        super().__init__()
        self.mount = mount if isinstance(mount, Mount) else Mount(mount)
        self.offset = offset
        self.timeout = timeout
        # this fit's: the first epoch a checkpoint resumes, whether
        # on_fit_start has run (some strategies restore after it), and the
        # epoch switched to before the first epoch's iterator
        self._resumed: Optional[int] = None
        self._fit_started = False
        self._first: Optional[int] = None

    def _writes(self, trainer: Any) -> bool:
        rank = int(getattr(trainer, "global_rank", job_rank()))
        world = int(getattr(trainer, "world_size", 1))
        served = [r for r in self.mount.ranks if r < world]
        return not served or rank == min(served)

    def switch(self, trainer: Any, epoch: Optional[int] = None) -> None:
        """Serve `epoch` (default trainer.current_epoch) + offset, once per
        mount: this rank writes it or waits for the rank that does."""
        if epoch is None:
            epoch = int(trainer.current_epoch)
        epoch += self.offset
        if self._writes(trainer):
            self.mount.set_epoch(epoch, timeout=self.timeout)
        else:
            self.mount.wait_epoch(epoch, timeout=self.timeout)

    def setup(self, trainer: Any, pl_module: Any, stage: str) -> None:
        self._resumed = None
        self._fit_started = False
        self._first = None

    def _switch_first(self, trainer: Any, epoch: Optional[int]) -> None:
        self.switch(trainer, epoch)
        self._first = int(trainer.current_epoch) if epoch is None else epoch

    def on_save_checkpoint(self, trainer: Any, pl_module: Any,
                           checkpoint: Dict[str, Any]) -> None:
        world = int(getattr(trainer, "world_size", 1))
        dist = _torch_dist()
        if world < 2 or dist is None:
            return
        mine = _loop_state(checkpoint).get(_LOADERS)
        states: List[Any] = [None] * world
        dist.all_gather_object(states, mine)
        checkpoint[_RANKS_LOADERS] = states

    def on_load_checkpoint(self, trainer: Any, pl_module: Any,
                           checkpoint: Dict[str, Any]) -> None:
        _own_loader_state(trainer, checkpoint)
        fn = getattr(trainer.state, "fn", None)
        if getattr(fn, "value", fn) != "fit":  # validate, test, predict
            return
        self._resumed = _resumed_epoch(trainer, checkpoint)
        if self._fit_started:
            self._switch_first(trainer, self._resumed)

    def on_fit_start(self, trainer: Any, pl_module: Any) -> None:
        self._fit_started = True
        if self._resumed is not None:
            self._switch_first(trainer, self._resumed)
        elif not getattr(trainer, "ckpt_path", None):
            self._switch_first(trainer, None)
        # else on_load_checkpoint, still to come, switches

    def on_train_epoch_start(self, trainer: Any, pl_module: Any) -> None:
        # the first epoch is served already: no second write (nor wait)
        first, self._first = self._first, None
        if first != int(trainer.current_epoch):
            self.switch(trainer)


# where Lightning (2.2 on) keeps the loaders' states in a checkpoint's
# fit loop state, and where this callback keeps every rank's
_LOADERS = "combined_loader"
_RANKS_LOADERS = "shardfs_loader_states"


def _loop_state(checkpoint: Dict[str, Any]) -> Dict[str, Any]:
    """The fit loop's own state in a checkpoint ({} when it has none)."""
    try:
        state = checkpoint["loops"]["fit_loop"]["state_dict"]
    except (KeyError, TypeError):
        return {}
    return state if isinstance(state, dict) else {}


def _own_loader_state(trainer: Any, checkpoint: Dict[str, Any]) -> None:
    """Put this rank's loader state, kept by on_save_checkpoint, where
    Lightning restores the loaders' from; a checkpoint of another world
    size: none (the loaders start their views)."""
    states = checkpoint.get(_RANKS_LOADERS)
    loop = _loop_state(checkpoint)
    if not isinstance(states, list) or not loop:
        return
    rank = int(getattr(trainer, "global_rank", job_rank()))
    world = int(getattr(trainer, "world_size", 1))
    mine = states[rank] if len(states) == world else None
    if mine is None:
        loop.pop(_LOADERS, None)
    else:
        loop[_LOADERS] = mine


def _resumed_epoch(trainer: Any, checkpoint: Dict[str, Any]) -> int:
    """The epoch a fit resumed from `checkpoint` runs first: what
    trainer.current_epoch will be at its first on_train_epoch_start.
    Lightning 2.1's FitLoop.on_run_start sets it to the checkpoint's
    processed epochs (a checkpoint written in on_train_epoch_end has not
    counted that epoch completed yet), unless the training is bounded by
    max_steps: then it is the completed epochs.  A checkpoint without loop
    state: its "epoch"."""
    try:
        current = checkpoint["loops"]["fit_loop"]["epoch_progress"]["current"]
        if int(getattr(trainer, "max_steps", -1)) != -1:
            return int(current["completed"])
        return int(current["processed"])
    except (KeyError, TypeError):
        return int(checkpoint.get("epoch", trainer.current_epoch))


def epoch_callback(mount: Union[Mount, str, "os.PathLike[str]"],
                   offset: int = 0, timeout: Optional[float] = None
                   ) -> ShardfsEpoch:
    """ShardfsEpoch(mount, offset)."""
    return ShardfsEpoch(mount, offset, 600.0 if timeout is None else timeout)
