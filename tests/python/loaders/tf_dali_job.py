"""The tf.data and DALI recipes of docs/loaders.md, run in the environment
of tests/python/requirements-tf-dali.txt (test_tf_dali.py starts it):

  tf_dali_job.py examples DIR N...     TFRecord shards of tf.train.Examples
                                       ({"key", "data"}), N records each
  tf_dali_job.py tfdata MNT RANK       the tfdata recipe
  tf_dali_job.py webdataset MNT RANK   dali_webdataset, the .jpg members
  tf_dali_job.py files MNT RANK CLASSES    dali_files (CLASSES: a,b,...)
  tf_dali_job.py tfrecord MNT RANK IDX     dali_tfrecord, the keys

Each run prints JSON: the batches, every sample as the SHA-256 of its
bytes (tfrecord: its key), for the test to compare with the plan."""
from __future__ import annotations

import hashlib
import json
import os
import sys

from helpers import recipe


def sha(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


def examples(d: str, counts: list) -> None:
    import tensorflow as tf
    os.makedirs(d, exist_ok=True)
    for s, n in enumerate(counts):
        path = os.path.join(d, "shard-%06d.tfrecord" % s)
        with tf.io.TFRecordWriter(path) as w:
            for i in range(n):
                key = b"%06d_%06d" % (s, i)
                data = hashlib.sha256(key).digest() * (1 + i % 5)
                ex = tf.train.Example(features=tf.train.Features(feature={
                    "key": tf.train.Feature(
                        bytes_list=tf.train.BytesList(value=[key])),
                    "data": tf.train.Feature(
                        bytes_list=tf.train.BytesList(value=[data]))}))
                w.write(ex.SerializeToString())


def samples(tl) -> list:
    import numpy as np
    return [np.array(tl[i]).tobytes() for i in range(len(tl))]


def main() -> None:
    mode = sys.argv[1]
    if mode == "examples":
        examples(sys.argv[2], [int(n) for n in sys.argv[3:]])
        return
    mnt, rank = sys.argv[2], int(sys.argv[3])
    out: dict = {}
    if mode == "tfdata":
        ds = recipe("tfdata").tf_records(mnt, rank)
        out["batches"] = [[sha(r) for r in b.numpy()] for b in ds]
    elif mode == "webdataset":
        dali = recipe("dali")
        pipe = dali.dali_webdataset(mnt, rank, ext=["jpg"])
        out["batches"] = [[sha(s) for s in samples(o[0])]
                          for o in dali.dali_run(pipe)]
    elif mode == "files":
        dali = recipe("dali")
        pipe, files = dali.dali_files(mnt, rank, sys.argv[4].split(","))
        out["files"] = files
        out["batches"] = [[[sha(s), int.from_bytes(label, "little",
                                                    signed=True)]
                           for s, label in zip(samples(o[0]),
                                               samples(o[1]))]
                          for o in dali.dali_run(pipe)]
    elif mode == "tfrecord":
        dali = recipe("dali")
        import nvidia.dali.tfrecord as tfrec
        pipe = dali.dali_tfrecord(
            mnt, rank, {"key": tfrec.FixedLenFeature((), tfrec.string, "")},
            sys.argv[4])
        out["batches"] = [[s.rstrip(b"\0").decode() for s in samples(o[0])]
                          for o in dali.dali_run(pipe)]
    else:
        raise SystemExit("tf_dali_job.py: unknown mode %r" % mode)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
