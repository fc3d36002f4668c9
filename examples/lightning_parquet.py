"""A seed job users come from: Lightning DDP over part-*.parquet read
with pyarrow, here over a shardfs view (no DistributedSampler, no glob
split by rank: the mount has split and shuffled).

    shardfs SRC MNT -o world=2,workers=2,batch=4
    python lightning_parquet.py MNT OUT EPOCHS

Trainer(strategy="ddp", accelerator="cpu", devices=2,
use_distributed_sampler=False) with shardfs's epoch callback, a
DataLoader of the mount's batch and workers over shardfs.ShardfsDataset
(Parquet rows read with pyarrow).  Each rank writes OUT/rank<r>.txt: a
line "epoch E: S steps, N rows" per epoch, then the keys it read, one a
line, each after its epoch ("E key").
"""
from __future__ import annotations

import os
import sys

import pytorch_lightning as pl
import torch
from torch.utils.data import DataLoader

import shardfs
from shardfs.lightning import ShardfsEpoch


def row(sample):
    return {"key": sample["key"], "x": torch.tensor([float(sample["x"])])}


class Model(pl.LightningModule):
    def __init__(self, out: str) -> None:
        super().__init__()
        self.out = out
        self.layer = torch.nn.Linear(1, 1)
        self.seen: dict = {}

    def training_step(self, batch, batch_idx):
        self.seen.setdefault(self.current_epoch, []).append(batch["key"])
        return self.layer(batch["x"]).square().mean()

    def on_train_end(self) -> None:
        with open(os.path.join(self.out, "rank%d.txt" % self.global_rank),
                  "w") as f:
            for e, batches in sorted(self.seen.items()):
                f.write("epoch %d: %d steps, %d rows\n"
                        % (e, len(batches), sum(len(b) for b in batches)))
            for e, batches in sorted(self.seen.items()):
                for b in batches:
                    for k in b:
                        f.write("%d %s\n" % (e, k))

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


def main() -> None:
    mnt, out, epochs = sys.argv[1], sys.argv[2], int(sys.argv[3])
    m = shardfs.Mount(mnt)
    loader = DataLoader(shardfs.ShardfsDataset(m, transform=row,
                                               batch_size=m.batch),
                        batch_size=m.batch, num_workers=m.workers,
                        multiprocessing_context="forkserver")
    trainer = pl.Trainer(strategy="ddp", accelerator="cpu", devices=2,
                         max_epochs=epochs, use_distributed_sampler=False,
                         callbacks=[ShardfsEpoch(m)], logger=False,
                         enable_checkpointing=False,
                         enable_progress_bar=False,
                         enable_model_summary=False)
    trainer.fit(Model(out), loader)


if __name__ == "__main__":
    main()
