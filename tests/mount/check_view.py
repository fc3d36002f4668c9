#!/usr/bin/env python3
"""Check a mounted shardfs view against its plan and its source, byte for byte.

Usage: check_view.py MNT FORMAT

Reads MNT/.shardfs/plan.json (the plan being served) and, for every reader
the mount shows, its directory: the entries must be the plan's files in the
plan's order (os.listdir order = sorted order), whole shards symlinks to the
source (or regular files with symlinks=0), and every sample read through the
mount (tar members with tarfile, jsonl lines, TFRecord records with their
CRCs, plain files) must equal the source sample it claims to be.  Then the
counts: every reader has per_reader samples; over all readers every sample of
the remaining epoch appears, and the extra appearances are exactly the
reported padding.  Prints one line per failure and a closing tally.
"""
import collections
import json
import os
import struct
import sys
import tarfile

MNT, FMT = sys.argv[1], sys.argv[2]
failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL: " + msg)


def key(name):
    d, _, b = name.rpartition("/")
    return (d + "/" if d else "") + b.split(".", 1)[0]


def tar_samples(path):
    """[(name, bytes) ...] per sample, from a tar read with tarfile."""
    out, last = [], None
    with tarfile.open(path) as t:
        for m in t:
            k = key(m.name)
            if k != last:
                out.append([])
                last = k
            data = t.extractfile(m).read() if m.isfile() else b""
            out[-1].append((m.name, data))
    return out


def masked_crc(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 & -(crc & 1))
    crc ^= 0xFFFFFFFF
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def tfrecord_samples(path):
    data, off, out = open(path, "rb").read(), 0, []
    while off < len(data):
        n = struct.unpack_from("<Q", data, off)[0]
        if struct.unpack_from("<I", data, off + 8)[0] != masked_crc(data[off:off + 8]):
            raise ValueError("bad length CRC at %d" % off)
        body = data[off + 12:off + 12 + n]
        if struct.unpack_from("<I", data, off + 12 + n)[0] != masked_crc(body):
            raise ValueError("bad data CRC at %d" % off)
        out.append(body)
        off += 16 + n
    return out


def jsonl_samples(path):
    data = open(path, "rb").read()
    lines = data.split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    return [l + b"\n" for l in lines]


READERS = {"tar": tar_samples, "tfrecord": tfrecord_samples,
           "jsonl": jsonl_samples}
source_cache = {}


def source_samples(src, shard):
    if shard not in source_cache:
        source_cache[shard] = READERS[FMT](os.path.join(src, shard))
    return source_cache[shard]


def expected(f):
    return [(f["shard"], first + k) for first, count in f["runs"]
            for k in range(count)]


def check_reader(src, plan, reader, seen):
    d = os.path.join(MNT, str(reader["rank"]), str(reader["worker"]))
    names = os.listdir(d)
    if names != sorted(names):
        fail("%s: directory order is not sorted order" % d)
    if FMT == "files":
        return check_files_reader(src, d, reader, seen)
    if len(names) != len(reader["files"]):
        fail("%s: %d entries, the plan has %d files" % (d, len(names), len(reader["files"])))
        return
    total = 0
    for name, f in zip(names, reader["files"]):
        path = os.path.join(d, name)
        if not name.startswith("%06d-" % names.index(name)):
            fail("%s: no sequence number" % path)
        if f["whole"] and symlinks:
            want = os.path.join(src, f["shard"])
            if not os.path.islink(path) or os.readlink(path) != want:
                fail("%s: not a symlink to %s" % (path, want))
        elif os.path.islink(path) or not os.path.isfile(path):
            fail("%s: not a regular file" % path)
        got = READERS[FMT](path)
        want = [source_samples(src, s)[i] for s, i in expected(f)]
        if got != want:
            fail("%s: %d samples read, differ from the %d source samples %s"
                 % (path, len(got), len(want), f["runs"][:3]))
        total += len(got)
        seen.update(expected(f))
    if total != plan["per_reader"]:
        fail("%s: %d samples, per_reader is %d" % (d, total, plan["per_reader"]))


def check_files_reader(src, d, reader, seen):
    """`files`: one entry per file of each sample, in its sub-directory."""
    total = 0
    for seq, f in enumerate(reader["files"]):
        members = [f["shard"]] + manifest_members.get(f["shard"], [])
        for m in members:
            sub, _, base = m.rpartition("/")
            path = os.path.join(d, sub, "%06d-%s" % (seq, base))
            if symlinks:
                if os.readlink(path) != os.path.join(src, m):
                    fail("%s: not a symlink to %s" % (path, m))
            if open(path, "rb").read() != open(os.path.join(src, m), "rb").read():
                fail("%s: bytes differ from %s" % (path, m))
        total += f["samples"]
        seen.update(expected(f))
    if total != plan["per_reader"]:
        fail("%s: %d samples, per_reader is %d" % (d, total, plan["per_reader"]))


status = json.load(open(os.path.join(MNT, ".shardfs", "status")))
plan = json.load(open(os.path.join(MNT, ".shardfs", "plan.json")))
symlinks = status["options"]["symlinks"]
src = status["source"]
index_dir = status["index"] or os.path.join(src, ".shardfs")
manifest = json.load(open(os.path.join(index_dir, "manifest.json"))) \
    if os.path.exists(os.path.join(index_dir, "manifest.json")) else None
manifest_members = {s["path"]: [m["path"] for m in s.get("members", [])]
                    for s in (manifest["shards"] if manifest else [])}
shown = {(r["rank"], r["worker"]) for r in status["plan"]["readers"]}
seen = collections.Counter()
for reader in plan["readers"]:
    if (reader["rank"], reader["worker"]) in shown:
        check_reader(src, plan, reader, seen)
if len(shown) == len(plan["readers"]):
    # every remaining sample once, plus exactly the padding, minus the drop
    total, distinct = sum(seen.values()), len(seen)
    if total != len(plan["readers"]) * plan["per_reader"]:
        fail("%d samples in all, want %d"
             % (total, len(plan["readers"]) * plan["per_reader"]))
    if distinct != plan["remaining"] - plan["dropped"]:
        fail("%d distinct samples, want %d remaining - %d dropped"
             % (distinct, plan["remaining"], plan["dropped"]))
    if total - distinct != plan["padding"]:
        fail("%d repeated samples, padding is %d"
             % (total - distinct, plan["padding"]))
print("check_view %s: %d readers, %d samples each, %d failures"
      % (MNT, len(shown), plan["per_reader"], len(failures)))
sys.exit(1 if failures else 0)
