"""A seed job users come from: an NVIDIA DALI pipeline reading
WebDataset tars, here over a shardfs view, without shard_id, num_shards
or pad_last_batch (the view is the rank's share, every rank the same
count, a multiple of the batch).

    shardfs SRC MNT -o world=2,workers=1,batch=4
    python dali_webdataset.py MNT RANK

A CPU pipeline (device_id=None) of batch_size = the mount's batch over
the rank's tars in name order; prints "rank R: B batches, N samples, all
full" and the SHA-256 of the .jpg members read, in order."""
from __future__ import annotations

import hashlib
import sys

from nvidia.dali import fn, pipeline_def

import shardfs


def main() -> None:
    mnt, rank = sys.argv[1], int(sys.argv[2])
    m = shardfs.Mount(mnt)
    paths = [str(f) for f in m.files(rank, 0)]

    @pipeline_def(batch_size=m.batch, num_threads=2, device_id=None)
    def pipe():
        return fn.readers.webdataset(paths=paths, ext=["jpg"],
                                     name="reader", random_shuffle=False)

    p = pipe()
    p.build()
    batches = p.epoch_size("reader") // p.max_batch_size
    digest = hashlib.sha256()
    samples = 0
    full = True
    for _ in range(batches):
        (jpg,) = p.run()
        full = full and len(jpg) == m.batch
        for i in range(len(jpg)):
            digest.update(jpg.at(i).tobytes())
            samples += 1
    print("rank %d: %d batches, %d samples, %s" % (
        rank, batches, samples, "all full" if full else "NOT all full"))
    print(digest.hexdigest())


if __name__ == "__main__":
    main()
