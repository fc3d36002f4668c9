"""Shared by the follow=1 tests (tests/mount/follow/) and the benchmark
(tests/bench/bench_follow.py): chunks of the three followable formats
written as a producer must (temporary name, then rename), readers of a
reader directory's stream.<ext>, a TFRecord reader with its CRC-32C, the
plan of a window computed by shardfs-plan over a copy of that window's
samples (docs/follow.md, "Not done yet"), and the checks' tally.

Every sample is unique and names itself: a JSONL line
{"id": "c00003-0012", "x": "..."}, a tar sample of two members
c00003-0012.txt (the id) and c00003-0012.cls, a TFRecord record b"c00003-0012 ...".
The standard library only (the DDP job adds torch)."""
from __future__ import annotations

import io
import json
import os
import random
import subprocess
import tarfile
import threading
import time
from typing import Dict, List, Optional, Sequence, Tuple

EXT = {"jsonl": "jsonl", "tar": "tar", "tfrecord": "tfrecord"}


# --- the tally: "ok: NAME" / "FAIL: NAME" lines, counted by the shell ---

class Tally:
    def __init__(self) -> None:
        self.passed = 0
        self.failed = 0

    def check(self, name: str, cond: bool, detail: str = "") -> bool:
        if cond:
            self.passed += 1
            print("ok: %s" % name, flush=True)
        else:
            self.failed += 1
            print("FAIL: %s" % name, flush=True)
            if detail:
                print("  " + detail.replace("\n", "\n  ")[:3000], flush=True)
        return cond

    def eq(self, name: str, got, want) -> bool:
        return self.check(name, got == want,
                          "got:  %s\nwant: %s" % (short(got), short(want)))

    def finish(self) -> int:
        print("checks: %d passed, %d failed" % (self.passed, self.failed),
              flush=True)
        return 1 if self.failed else 0


def short(x) -> str:
    s = repr(x)
    return s if len(s) < 600 else s[:600] + "... (%d chars)" % len(s)


# --- CRC-32C (Castagnoli) and TFRecord framing ---

_CRC_TABLE = []
for _i in range(256):
    _c = _i
    for _ in range(8):
        _c = (_c >> 1) ^ 0x82F63B78 if _c & 1 else _c >> 1
    _CRC_TABLE.append(_c)


def crc32c(data: bytes) -> int:
    c = 0xFFFFFFFF
    t = _CRC_TABLE
    for b in data:
        c = t[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def masked_crc(data: bytes) -> int:
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def tfrecord(data: bytes) -> bytes:
    n = len(data).to_bytes(8, "little")
    return (n + masked_crc(n).to_bytes(4, "little") + data
            + masked_crc(data).to_bytes(4, "little"))


class TFRecordError(Exception):
    pass


def read_tfrecords(f) -> List[bytes]:
    """Every record of the binary stream f, to its EOF, framing and both
    CRCs checked (raises TFRecordError naming the byte offset)."""
    out = []
    off = 0
    while True:
        head = readn(f, 12)
        if not head:
            return out
        if len(head) < 12:
            raise TFRecordError("truncated header at byte %d" % off)
        if int.from_bytes(head[8:12], "little") != masked_crc(head[:8]):
            raise TFRecordError("bad length CRC at byte %d" % off)
        n = int.from_bytes(head[:8], "little")
        body = readn(f, n + 4)
        if len(body) < n + 4:
            raise TFRecordError("truncated record at byte %d" % off)
        if int.from_bytes(body[n:], "little") != masked_crc(body[:n]):
            raise TFRecordError("bad data CRC at byte %d" % off)
        out.append(body[:n])
        off += 16 + n


def readn(f, n: int) -> bytes:
    """n bytes of f, fewer only at EOF (a raw FUSE file may answer
    short)."""
    parts = []
    while n > 0:
        b = f.read(n)
        if not b:
            break
        parts.append(b)
        n -= len(b)
    return b"".join(parts)


# --- samples and chunks ---

def sample_id(chunk: int, i: int) -> str:
    return "c%05d-%04d" % (chunk, i)


def chunk_name(chunk: int, fmt: str) -> str:
    return "chunk_%05d.%s" % (chunk, EXT[fmt])


def chunk_bytes(fmt: str, chunk: int, n: int, rng: random.Random,
                prefix: str = "c") -> Tuple[bytes, List[str]]:
    """The bytes of a chunk of n samples and their ids, in order."""
    ids = [prefix + sample_id(chunk, i)[1:] for i in range(n)]
    if fmt == "jsonl":
        return (b"".join((json.dumps({"id": s, "x": "x" * rng.randint(0, 200)})
                          + "\n").encode() for s in ids), ids)
    if fmt == "tfrecord":
        return (b"".join(tfrecord(("%s %s" % (s, "y" * rng.randint(0, 300)))
                                  .encode()) for s in ids), ids)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as t:
        for s in ids:
            for ext, data in (("txt", s.encode()),
                              ("cls", b"%d" % rng.randint(0, 9999))):
                ti = tarfile.TarInfo("%s.%s" % (s, ext))
                ti.size = len(data)
                ti.mtime = 1700000000
                t.addfile(ti, io.BytesIO(data))
    return buf.getvalue(), ids


def write_chunk(src: str, name: str, data: bytes) -> None:
    """As the producer's contract says: a temporary name, then rename."""
    tmp = os.path.join(src, name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(data)
    os.rename(tmp, os.path.join(src, name))


def ids_of(fmt: str, data: bytes) -> List[str]:
    """The sample ids of a file's (or stream's) bytes, in order."""
    if fmt == "jsonl":
        return [json.loads(ln)["id"] for ln in data.splitlines()]
    if fmt == "tfrecord":
        return [r.split(b" ")[0].decode()
                for r in read_tfrecords(io.BytesIO(data))]
    out = []
    with tarfile.open(fileobj=io.BytesIO(data), mode="r|") as t:
        for m in t:
            if m.name.endswith(".txt"):
                out.append(t.extractfile(m).read().decode())
    return out


# --- readers ---

def reader_dirs(mnt: str, ranks: Sequence[int], workers: int) -> List[str]:
    return [os.path.join(mnt, str(r), str(w))
            for r in ranks for w in range(workers)]


class StreamReader(threading.Thread):
    """Reads DIR/stream.<ext> to its EOF with raw reads of `size` bytes;
    keeps the bytes, or the exception that ended it (e.g. EIO).  With
    verify_windows, each window file whose bytes the stream has passed is
    read at once and compared with them (window_mismatch names the first
    that differs; verified counts them), and, with ack, acknowledged as
    a loader does (.shardfs/ack: reads never consume)."""

    def __init__(self, d: str, fmt: str, size: int = 65536,
                 verify_windows: bool = False, first: int = 0,
                 ack: bool = True) -> None:
        super().__init__(daemon=True)
        self.d = d
        self.first = first  # the first window the mount serves
        self.ack = ack  # acknowledge each window verified (.shardfs/ack)
        self.fmt = fmt
        self.size = size
        self.verify_windows = verify_windows
        self.buf = bytearray()
        self.error: Optional[BaseException] = None
        self.done = False
        self.verified = 0
        self.window_sizes: List[int] = []
        self.window_mismatch: Optional[str] = None
        self.opened = threading.Event()

    def run(self) -> None:
        try:
            fd = os.open(os.path.join(self.d, "stream." + EXT[self.fmt]),
                         os.O_RDONLY)
        except BaseException as e:  # noqa: BLE001 - reported by the test
            self.error = e
            self.opened.set()
            return
        self.opened.set()
        try:
            while True:
                b = os.read(fd, self.size)
                if not b:
                    break
                self.buf += b
                if self.verify_windows:
                    self.verify()
            if self.verify_windows:
                self.verify()
            self.done = True
        except BaseException as e:  # noqa: BLE001
            self.error = e
        finally:
            os.close(fd)

    def verify(self) -> None:
        """Window files whose whole bytes the stream has passed: compare
        (a tar window ends with its own end-of-archive; the stream has one
        at its end only: compared without those 1024 bytes, but for the
        last)."""
        off = sum(self.window_sizes)
        while True:
            k = self.first + len(self.window_sizes)
            p = os.path.join(self.d, "window-%08d.%s" % (k, EXT[self.fmt]))
            try:
                with open(p, "rb") as f:
                    data = f.read()
            except FileNotFoundError:
                return
            body = data[:-1024] if self.fmt == "tar" else data
            if off + len(body) > len(self.buf):
                return
            if bytes(self.buf[off:off + len(body)]) != body and \
                    self.window_mismatch is None:
                self.window_mismatch = "%s: %d bytes at stream offset %d differ" % (
                    p, len(body), off)
            self.window_sizes.append(len(body))
            self.verified += 1
            off += len(body)
            if self.ack:
                acknowledge(self.d, k)


def acknowledge(d: str, window: int) -> None:
    """Reader directory D (MNT/RANK/WORKER) has taken windows up to
    WINDOW: "RANK WORKER WINDOW\n" to MNT/.shardfs/ack (docs/follow.md)."""
    mnt, rank, worker = (os.path.dirname(os.path.dirname(d)),
                         os.path.basename(os.path.dirname(d)),
                         os.path.basename(d))
    with open(os.path.join(mnt, ".shardfs", "ack"), "w") as f:
        f.write("%s %s %d\n" % (rank, worker, window))


def window_files(d: str, fmt: str) -> List[str]:
    return sorted(n for n in os.listdir(d)
                  if n.startswith("window-") and n.endswith("." + EXT[fmt]))


def read_consumed(mnt: str) -> str:
    with open(os.path.join(mnt, ".shardfs", "consumed")) as f:
        return f.read().strip()


def wait_for(cond, timeout: float, step: float = 0.02) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(step)
    return cond()


# --- the expected plan of a window (docs/follow.md: a window is planned
# like an epoch of its own over its samples; shardfs-plan over a copy) ---

def window_plan(tmp: str, fmt: str, pieces: List[Tuple[str, bytes]],
                opts: str, k: int) -> List[List[str]]:
    """Each reader's sample ids of window k, reader by reader, as
    shardfs-plan plans the pieces (shard name, bytes of the shard's
    samples in this window) under OPTS with epoch=k."""
    d = os.path.join(tmp, "window-%d" % k)
    os.makedirs(d, exist_ok=True)
    shard_ids = {}
    for name, data in pieces:
        with open(os.path.join(d, name), "wb") as f:
            f.write(data)
        shard_ids[name] = ids_of(fmt, data)
    subprocess.run(["shardfs-index", d, "--quiet", "--no-hash"], check=True)
    out = subprocess.run(["shardfs-plan", d, "-o", "%s,epoch=%d" % (opts, k),
                          "--json"], check=True, capture_output=True).stdout
    plan = json.loads(out)
    readers = []
    for r in sorted(plan["readers"], key=lambda r: (r["rank"], r["worker"])):
        ids = []
        for f in r["files"]:
            for first, count in f["runs"]:
                ids += shard_ids[f["shard"]][first:first + count]
        readers.append(ids)
    return readers


def split_stream(fmt: str, chunks: List[Tuple[str, bytes]], start: int,
                 n: int) -> List[List[Tuple[str, bytes]]]:
    """The stream of CHUNKS (name, bytes) in name order, its first START
    samples skipped, cut into windows of N samples: per window its pieces
    (shard name, a valid shard of the format holding that shard's samples
    in the window)."""
    samples = []  # (shard, bytes of one sample)
    for name, data in sorted(chunks):
        for s in sample_bytes(fmt, data):
            samples.append((name, s))
    samples = samples[start:]
    windows = []
    for w in range(0, len(samples), n):
        pieces: List[Tuple[str, List[bytes]]] = []
        for name, s in samples[w:w + n]:
            if pieces and pieces[-1][0] == name:
                pieces[-1][1].append(s)
            else:
                pieces.append((name, [s]))
        windows.append([(name, join_samples(fmt, ss)) for name, ss in pieces])
    return windows


def sample_bytes(fmt: str, data: bytes) -> List[bytes]:
    """A shard's samples, each as its bytes in the shard (a tar sample:
    its member records)."""
    if fmt == "jsonl":
        return [ln + b"\n" for ln in data.splitlines()]
    if fmt == "tfrecord":
        return [tfrecord(r) for r in read_tfrecords(io.BytesIO(data))]
    out = []
    src = tarfile.open(fileobj=io.BytesIO(data), mode="r")
    members = src.getmembers()
    for i in range(0, len(members), 2):
        start = members[i].offset
        end = (members[i + 2].offset if i + 2 < len(members)
               else len(strip_tar_end(data)))
        out.append(data[start:end])
    return out


def join_samples(fmt: str, samples: List[bytes]) -> bytes:
    """Samples as one shard (tar: one end-of-archive, 2 zero blocks)."""
    return b"".join(samples) + (b"\0" * 1024 if fmt == "tar" else b"")


def strip_tar_end(data: bytes) -> bytes:
    """A USTAR archive without its end-of-archive (the zero blocks and
    the record padding after its last member)."""
    off = 0
    while off + 512 <= len(data) and data[off:off + 512] != b"\0" * 512:
        size = int(data[off + 124:off + 136].split(b"\0")[0].strip() or b"0", 8)
        off += 512 + (size + 511) // 512 * 512
    return data[:off]
