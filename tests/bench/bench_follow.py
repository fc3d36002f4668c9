"""The measuring half of bench_follow.sh (which mounts):

  latency DIR SRC CHUNKS WINDOW JITTER   a reader blocks in a read of
      DIR/stream.jsonl while the producer renames a chunk of WINDOW
      samples (one window) into SRC: the time from the rename to the
      read's return, per chunk (renames JITTER s apart at most, at
      random, so that they fall anywhere in a polling interval); prints "latency_ms median p99 max n"
  read FILE...                    reads every FILE to its end with 1 MiB
      reads: prints "read BYTES SECONDS"
  produce DIR SRC CHUNKS SAMPLES  renames CHUNKS chunks of SAMPLES lines
      into SRC as fast as it can while a reader reads DIR/stream.jsonl
      along; returns once the reader holds every complete window: prints
      "produce SECONDS_TO_WRITE SECONDS_TO_READABLE BYTES"
"""
from __future__ import annotations

import os
import random
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "mount", "follow"))
import follow_lib as L  # noqa: E402


class Along(threading.Thread):
    """Reads a stream to its EOF; `got` bytes so far, `stamps` the
    monotonic time of every read's return with the total then."""

    def __init__(self, path: str) -> None:
        super().__init__(daemon=True)
        self.path = path
        self.got = 0
        self.stamps = []
        self.cv = threading.Condition()
        self.error = None

    def run(self) -> None:
        try:
            fd = os.open(self.path, os.O_RDONLY)
            while True:
                b = os.read(fd, 1 << 20)
                now = time.monotonic()
                with self.cv:
                    if b:
                        self.got += len(b)
                    self.stamps.append((now, self.got))
                    self.cv.notify_all()
                if not b:
                    break
            os.close(fd)
        except OSError as e:
            self.error = e
            with self.cv:
                self.cv.notify_all()

    def wait_bytes(self, n: int, timeout: float) -> float:
        """The time of the read that brought the total to n bytes."""
        end = time.monotonic() + timeout
        with self.cv:
            while self.got < n and self.error is None:
                left = end - time.monotonic()
                if left <= 0:
                    raise TimeoutError("%d of %d bytes" % (self.got, n))
                self.cv.wait(left)
            if self.error:
                raise self.error
            for t, total in self.stamps:
                if total >= n:
                    return t
        raise AssertionError("unreachable")


def pct(xs, p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def latency(d: str, src: str, chunks: int, window: int,
            jitter: float) -> None:
    r = Along(os.path.join(d, "stream.jsonl"))
    r.start()
    rng = random.Random(1)
    lat = []
    want = 0
    for c in range(chunks):
        data, _ = L.chunk_bytes("jsonl", c, window, rng)
        name = L.chunk_name(c, "jsonl")
        tmp = os.path.join(src, name + ".tmp")
        with open(tmp, "wb") as f:
            f.write(data)
        time.sleep(rng.uniform(0.005, jitter))  # not in phase with a timer
        t0 = time.monotonic()
        os.rename(tmp, os.path.join(src, name))
        want += len(data)
        t1 = r.wait_bytes(want, 30)
        lat.append((t1 - t0) * 1000)
    with open(os.path.join(src, ".shardfs-end"), "w"):
        pass
    r.join(30)
    print("latency_ms %.2f %.2f %.2f %d" % (pct(lat, 50), pct(lat, 99),
                                             max(lat), len(lat)))


def read(files) -> None:
    t0 = time.monotonic()
    n = 0
    for p in files:
        fd = os.open(p, os.O_RDONLY)
        while True:
            b = os.read(fd, 1 << 20)
            if not b:
                break
            n += len(b)
        os.close(fd)
    print("read %d %.6f" % (n, time.monotonic() - t0))


def produce(d: str, src: str, chunks: int, samples: int, window: int) -> None:
    r = Along(os.path.join(d, "stream.jsonl"))
    r.start()
    rng = random.Random(2)
    t0 = time.monotonic()
    total = 0
    nsamples = 0
    sizes = []
    for c in range(chunks):
        data, _ = L.chunk_bytes("jsonl", c, samples, rng)
        L.write_chunk(src, L.chunk_name(c, "jsonl"), data)
        sizes.append(len(data))
        total += len(data)
        nsamples += samples
    t1 = time.monotonic()
    # every complete window: with world=1, workers=1 and shuffle=none the
    # stream is the chunks in order
    complete = nsamples // window * window
    want = sum(sizes[:complete // samples])
    r.wait_bytes(want, 600)
    t2 = time.monotonic()
    print("produce %.3f %.3f %d" % (t1 - t0, t2 - t0, want))


def main() -> int:
    a = sys.argv[1:]
    if a[0] == "latency":
        latency(a[1], a[2], int(a[3]), int(a[4]), float(a[5]))
    elif a[0] == "read":
        read(a[1:])
    elif a[0] == "produce":
        produce(a[1], a[2], int(a[3]), int(a[4]), int(a[5]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
