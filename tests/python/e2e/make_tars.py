#!/usr/bin/env python3
"""Write a WebDataset-style tar dataset for the end-to-end tests.

Usage: make_tars.py DIR COUNT [COUNT ...] [--payload BYTES] [--first K]

Shard i (shard-000i.tar) holds COUNT[i] samples.  Keys are s000000,
s000001, ... (from sK with --first, so that datasets mixed together keep
distinct keys) across the whole dataset, so a key names its sample; each
sample has `<key>.input` (4 little-endian float32 features),
`<key>.cls` (its label, 0 or 1, in ASCII) and, with --payload, a
`<key>.bin` of that many bytes.  The same arguments give the same bytes.
"""
import io
import random
import struct
import sys
import tarfile


def member(tar, name, data):
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mtime = 1700000000
    info.mode = 0o644
    tar.addfile(info, io.BytesIO(data))


def main():
    args = sys.argv[1:]
    payload = key = 0
    if "--payload" in args:
        i = args.index("--payload")
        payload = int(args[i + 1])
        del args[i:i + 2]
    if "--first" in args:
        i = args.index("--first")
        key = int(args[i + 1])
        del args[i:i + 2]
    out, counts = args[0], [int(c) for c in args[1:]]
    rng = random.Random(1 + key)
    for shard, count in enumerate(counts):
        with tarfile.open("%s/shard-%04d.tar" % (out, shard), "w",
                          format=tarfile.USTAR_FORMAT) as tar:
            for _ in range(count):
                x = [rng.uniform(-1, 1) for _ in range(4)]
                label = int(x[0] + 0.5 * x[1] > 0)
                name = "s%06d" % key
                member(tar, name + ".input", struct.pack("<4f", *x))
                member(tar, name + ".cls", b"%d" % label)
                if payload:
                    member(tar, name + ".bin", rng.randbytes(payload))
                key += 1


if __name__ == "__main__":
    main()
