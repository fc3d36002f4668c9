"""The follow=1 checks on real mounts (test_follow.sh mounts, this reads
and writes): python3 follow_test.py SCENARIO ARGS...; prints "ok: NAME"
or "FAIL: NAME" per check and "checks: P passed, F failed" at the end.

  grow FMT SRC TMP N OPTS MNT...   a producer writes chunks of random
      sizes at random intervals into SRC (empty) while every reader of
      every MNT reads its stream.<ext> from before the first chunk; it
      deletes the shards up to the smallest consumed of the MNTs as it
      goes (once the readers compared those windows' files), then ends
      the stream.  OPTS: the plan options of the windows (world=...).
      With $FOLLOW_PROGRESS, the progress=DIR of the mounts.
  formats FMT SRC TMP N OPTS MNT   the same without deletion, read by
      tarfile in stream mode (tar) or the TFRecord reader of
      follow_lib (tfrecord), one thread per reader
  timeout MNT SECONDS              a read of stream.jsonl in an empty
      source fails with EIO after about SECONDS
  tmp SRC TMP MNT                  a chunk written slowly under x.tmp and
      a .hidden file: nothing served until the rename
  order SRC TMP MNT                chunk_00003 after chunk_00005: never
      served
  restart1 SRC TMP N OPTS MNT      phase 1 of a restart: chunks, every
      reader reads 3 windows of its stream, then stops
  restart2 SRC TMP N OPTS MNT      phase 2: after a remount with
      start=3N, more chunks and the end: the rest, exactly
  ddp SRC TMP N BATCH MNT0 MNT1    a DDP job (gloo, 2 ranks) over a
      source that grows while it runs
"""
from __future__ import annotations

import errno
import json
import os
import random
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from collections import Counter
from typing import Dict, List, Sequence, Tuple

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import follow_lib as L  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def opt(opts: str, key: str, default: int) -> int:
    for kv in opts.split(","):
        if kv.startswith(key + "="):
            return int(kv.split("=", 1)[1])
    return default


def mount_dirs(mnts: Sequence[str], opts: str) -> List[str]:
    """Every reader directory the mounts show, in reader order (a mount
    of one rank shows only that rank)."""
    workers = opt(opts, "workers", 1)
    dirs = []
    for m in mnts:
        for r in sorted(int(x) for x in os.listdir(m) if x.isdigit()):
            dirs += L.reader_dirs(m, [r], workers)
    return dirs


class Producer:
    """Writes chunks (temporary name, then rename) and keeps their
    bytes."""

    def __init__(self, src: str, fmt: str, seed: int, first: int = 0) -> None:
        self.src = src
        self.fmt = fmt
        self.rng = random.Random(seed)
        self.next = first
        self.chunks: List[Tuple[str, bytes]] = []
        self.counts: List[int] = []

    def write(self, n: int) -> str:
        data, _ = L.chunk_bytes(self.fmt, self.next, n, self.rng)
        name = L.chunk_name(self.next, self.fmt)
        L.write_chunk(self.src, name, data)
        self.chunks.append((name, data))
        self.counts.append(n)
        self.next += 1
        return name

    def end(self) -> None:
        with open(os.path.join(self.src, ".shardfs-end"), "w") as f:
            f.write("end\n")


def readers_waiting(mnts: Sequence[str]) -> List[Tuple[int, int, int, bool]]:
    """(rank, worker, window, waiting) of every reader in the mounts'
    .shardfs/status."""
    out = []
    for m in mnts:
        with open(os.path.join(m, ".shardfs", "status")) as f:
            for r in json.load(f)["readers"]:
                out.append((r["rank"], r["worker"], r["window"], r["waiting"]))
    return out


def expected_readers(t: L.Tally, fmt: str, chunks, start: int, n: int,
                     opts: str, tmp: str, nreaders: int, first_window: int = 0
                     ) -> Tuple[List[List[str]], List[List[List[str]]]]:
    """Each reader's ids over every window, as shardfs-plan plans each
    window (docs/follow.md); and the windows' plans themselves."""
    windows = L.split_stream(fmt, chunks, start, n)
    plans = []
    for k, pieces in enumerate(windows):
        plans.append(L.window_plan(tmp, fmt, pieces, opts, first_window + k))
    readers = [[] for _ in range(nreaders)]
    for p in plans:
        if len(p) != nreaders:
            t.check("the plan of a window has %d readers" % nreaders, False,
                    "it has %d" % len(p))
            continue
        for i, ids in enumerate(p):
            readers[i] += ids
    return readers, plans


def check_coverage(t: L.Tally, what: str, got: List[List[str]],
                   produced: List[str], last_window: List[str],
                   earlier: List[str] = ()) -> None:
    """Equal counts; every produced id exactly once over all readers
    (and EARLIER, read before a restart), plus only repeats of ids of
    the last window."""
    counts = [len(g) for g in got]
    t.check("%s: equal counts per reader" % what, len(set(counts)) == 1,
            "counts: %s" % counts)
    c = Counter(x for g in got for x in g)
    c.update(earlier)
    unknown = sorted(set(c) - set(produced))
    missing = sorted(set(produced) - set(c))
    t.check("%s: only produced samples" % what, not unknown,
            "not produced: %s" % unknown[:20])
    t.check("%s: every produced sample read" % what, not missing,
            "%d missing: %s" % (len(missing), missing[:20]))
    extra = {x: k - 1 for x, k in c.items() if k > 1}
    last = set(last_window)
    bad = sorted(x for x in extra if x not in last)
    t.check("%s: repeats only of the last window's samples (padding)" % what,
            not bad, "repeated outside the last window: %s" % bad[:20])
    total = sum(counts) + len(earlier)
    t.eq("%s: padding (%d) = readers x count - produced" % (
        what, sum(extra.values())),
         sum(extra.values()), total - len(produced))


def ids_per_reader(fmt: str, readers) -> List[List[str]]:
    out = []
    for r in readers:
        try:
            out.append(L.ids_of(fmt, bytes(r.buf)))
        except Exception as e:  # noqa: BLE001
            out.append(["<unparsable: %s>" % e])
    return out


def start_readers(t: L.Tally, dirs: List[str], fmt: str,
                  verify: bool = True, first: int = 0) -> List[L.StreamReader]:
    readers = [L.StreamReader(d, fmt, verify_windows=verify, first=first)
               for d in dirs]
    for r in readers:
        r.start()
    for r in readers:
        r.opened.wait(10)
    t.check("stream.%s opens in every reader directory before any shard"
            % L.EXT[fmt], all(r.error is None and r.opened.is_set()
                              for r in readers),
            "; ".join("%s: %r" % (r.d, r.error) for r in readers if r.error))
    return readers


def join(t: L.Tally, what: str, readers, timeout: float) -> bool:
    end = time.monotonic() + timeout
    for r in readers:
        r.join(max(0.1, end - time.monotonic()))
    ok = all(r.done and r.error is None for r in readers)
    t.check("%s: every reader reads its stream to EOF" % what, ok,
            "; ".join("%s: done=%s error=%r, %d bytes" % (r.d, r.done, r.error,
                                                          len(r.buf))
                      for r in readers))
    return ok


def last_shard_window(counts: List[int], n: int, start: int = 0) -> List[int]:
    """Per chunk, the window its last sample lies in."""
    out = []
    pos = -start
    for c in counts:
        pos += c
        out.append((pos - 1) // n if pos > 0 else -1)
    return out


# --- a: a growing source, two mounts, deletion of consumed shards ---

def grow(fmt: str, src: str, tmp: str, n: int, opts: str,
         mnts: List[str]) -> int:
    t = L.Tally()
    dirs = mount_dirs(mnts, opts)
    t.eq("reader directories", len(dirs),
         opt(opts, "world", 1) * opt(opts, "workers", 1))
    readers = start_readers(t, dirs, fmt)
    p = Producer(src, fmt, 11)
    deleted: List[str] = []
    consumed_seen: Dict[str, List[str]] = {m: [] for m in mnts}
    rng = random.Random(5)

    def delete_consumed() -> None:
        cs = []
        for m in mnts:
            c = L.read_consumed(m)
            if not consumed_seen[m] or consumed_seen[m][-1] != c:
                consumed_seen[m].append(c)
            cs.append(c)
        if not all(cs):
            return
        upto = min(cs)
        # the readers compared those windows' files with their streams
        verified = min(r.verified for r in readers)
        lw = last_shard_window(p.counts, n)
        for i, (name, _) in enumerate(p.chunks):
            if name <= upto and lw[i] < verified and \
                    name not in deleted:
                os.unlink(os.path.join(src, name))
                deleted.append(name)

    time.sleep(0.3)  # the readers wait on an empty source
    nr = len(dirs)
    ok = L.wait_for(lambda: all(w for *_, w in readers_waiting(mnts)), 5)
    t.eq("status: every reader waits for window 0", readers_waiting(mnts),
         [(r, w, 0, True) for r in range(opt(opts, "world", 1))
          for w in range(opt(opts, "workers", 1))][:nr])
    t.check("nothing to read before the first chunk",
            all(len(r.buf) == 0 and r.error is None for r in readers),
            "; ".join("%s: %d bytes, %r" % (r.d, len(r.buf), r.error)
                      for r in readers))
    for i in range(40):
        time.sleep(rng.uniform(0, 0.08))
        p.write(rng.randint(1, 25))
        delete_consumed()
    # let the readers catch up, deleting as they do, then end
    L.wait_for(lambda: (delete_consumed() or True) and
               min(r.verified for r in readers) >= sum(p.counts) // n, 20, 0.05)
    p.end()
    join(t, "grow", readers, 60)
    delete_consumed()
    produced = [x for _, d in p.chunks for x in L.ids_of(fmt, d)]
    windows = L.split_stream(fmt, p.chunks, 0, n)
    last_ids = [x for _, d in windows[-1] for x in L.ids_of(fmt, d)]
    got = ids_per_reader(fmt, readers)
    check_coverage(t, "grow", got, produced, last_ids)
    t.check("consumed shards were deleted as the stream went",
            len(deleted) >= len(p.chunks) // 2,
            "deleted %d of %d" % (len(deleted), len(p.chunks)))
    # window files: compared as the stream passed them
    t.check("every window file equals its bytes of the stream",
            all(r.window_mismatch is None for r in readers),
            "; ".join(r.window_mismatch for r in readers if r.window_mismatch))
    nwin = len(windows)
    t.eq("window files per reader", [r.verified for r in readers],
         [nwin] * len(readers))
    t.eq("the window files laid end to end are the stream",
         [sum(r.window_sizes) + (1024 if fmt == "tar" else 0)
          for r in readers], [len(r.buf) for r in readers])
    want, _ = expected_readers(t, fmt, p.chunks, 0, n, opts, tmp, len(dirs))
    for i, r in enumerate(readers):
        t.check("%s: the plan of every window, in order" % r.d,
                got[i] == want[i], first_diff(got[i], want[i]))
    last = p.chunks[-1][0]
    t.eq("consumed names the last shard at the end",
         [L.read_consumed(m) for m in mnts], [last] * len(mnts))
    t.check("consumed only moves forward",
            all(v == sorted(v) for v in consumed_seen.values()),
            repr(consumed_seen))
    prog = os.environ.get("FOLLOW_PROGRESS")
    if prog:
        ranks = sorted({int(d.split("/")[-2]) for d in dirs})
        for rank in ranks:
            path = os.path.join(prog, "rank-%d.json" % rank)
            try:
                with open(path) as f:
                    j = json.load(f)
            except (OSError, ValueError) as e:
                j = repr(e)
            t.eq("progress %s at the end" % path, j,
                 {"rank": rank, "consumed": last, "windows_read": nwin,
                  "ended": True})
    return t.finish()


def first_diff(a: List[str], b: List[str]) -> str:
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return "first difference at sample %d: got %s, want %s " \
                "(got %d samples, want %d)" % (i, x, y, len(a), len(b))
    return "got %d samples, want %d" % (len(a), len(b))


# --- b: tar read by tarfile in stream mode, TFRecord by our reader ---

class FormatReader(threading.Thread):
    def __init__(self, d: str, fmt: str) -> None:
        super().__init__(daemon=True)
        self.d = d
        self.fmt = fmt
        self.ids: List[str] = []
        self.error = None
        self.done = False

    def run(self) -> None:
        path = os.path.join(self.d, "stream." + L.EXT[self.fmt])
        try:
            with open(path, "rb") as f:
                if self.fmt == "tar":
                    with tarfile.open(fileobj=f, mode="r|") as tf:
                        for m in tf:
                            if m.name.endswith(".txt"):
                                self.ids.append(
                                    tf.extractfile(m).read().decode())
                else:
                    for rec in L.read_tfrecords(f):
                        self.ids.append(rec.split(b" ")[0].decode())
            self.done = True
        except BaseException as e:  # noqa: BLE001
            self.error = e


def formats(fmt: str, src: str, tmp: str, n: int, opts: str, mnt: str) -> int:
    t = L.Tally()
    dirs = mount_dirs([mnt], opts)
    readers = [FormatReader(d, fmt) for d in dirs]
    for r in readers:
        r.start()
    p = Producer(src, fmt, 21)
    rng = random.Random(6)
    for _ in range(15):
        time.sleep(rng.uniform(0, 0.05))
        p.write(rng.randint(1, 12))
    p.end()
    for r in readers:
        r.join(60)
    what = "%s stream" % fmt
    t.check("%s: every reader reads to the end (%s)" % (
        what, "tarfile r|" if fmt == "tar" else "TFRecord framing + CRC-32C"),
        all(r.done for r in readers),
        "; ".join("%s: %r after %d samples" % (r.d, r.error, len(r.ids))
                  for r in readers))
    produced = [x for _, d in p.chunks for x in L.ids_of(fmt, d)]
    windows = L.split_stream(fmt, p.chunks, 0, n)
    last_ids = [x for _, d in windows[-1] for x in L.ids_of(fmt, d)]
    got = [r.ids for r in readers]
    check_coverage(t, what, got, produced, last_ids)
    want, _ = expected_readers(t, fmt, p.chunks, 0, n, opts, tmp, len(dirs))
    for i, r in enumerate(readers):
        t.check("%s: %s reads the plan of every window" % (what, r.d),
                got[i] == want[i], first_diff(got[i], want[i]))
    return t.finish()


# --- c: the timeout ---

def timeout(mnt: str, seconds: float) -> int:
    t = L.Tally()
    path = os.path.join(mnt, "0", "0", "stream.jsonl")
    t0 = time.monotonic()
    err = None
    try:
        fd = os.open(path, os.O_RDONLY)
        try:
            data = os.read(fd, 4096)
            err = "read %d bytes" % len(data)
        finally:
            os.close(fd)
    except OSError as e:
        err = e.errno
    dt = time.monotonic() - t0
    t.eq("a read with no data fails with EIO", err, errno.EIO)
    t.check("... after follow_timeout=%g s" % seconds,
            seconds - 0.2 <= dt <= seconds + 2.5, "after %.2f s" % dt)
    return t.finish()


# --- d: a half-written file and a dot-file never served ---

def tmp_never(src: str, tmp: str, mnt: str) -> int:
    t = L.Tally()
    n = 8
    dirs = mount_dirs([mnt], "workers=2")
    readers = start_readers(t, dirs, "jsonl", verify=False)
    rng = random.Random(3)
    data, ids = L.chunk_bytes("jsonl", 0, 2 * n, rng)
    hidden, hidden_ids = L.chunk_bytes("jsonl", 0, 2 * n, rng, prefix="h")
    lines = data.splitlines(keepends=True)
    hlines = hidden.splitlines(keepends=True)

    def nothing() -> List[str]:
        bad = []
        for d in dirs:
            w = L.window_files(d, "jsonl")
            if w:
                bad.append("%s lists %s" % (d, w))
            sz = os.stat(os.path.join(d, "stream.jsonl")).st_size
            if sz:
                bad.append("%s/stream.jsonl has size %d" % (d, sz))
        for r in readers:
            if r.buf or r.error:
                bad.append("%s read %d bytes (%r)" % (r.d, len(r.buf), r.error))
        return bad

    seen = []
    with open(os.path.join(src, "x.tmp"), "wb") as f, \
            open(os.path.join(src, ".hidden.jsonl"), "wb") as g:
        for a, b in zip(lines, hlines):
            f.write(a)
            f.flush()
            g.write(b)
            g.flush()
            time.sleep(0.05)
            seen += nothing()
    time.sleep(1.5)  # past any scan the writes woke
    seen += nothing()
    t.check("while x.tmp and .hidden.jsonl are written (2 windows' worth), "
            "nothing is served", not seen, "; ".join(seen[:5]))
    os.rename(os.path.join(src, "x.tmp"), os.path.join(src, "chunk_00000.jsonl"))
    ok = L.wait_for(lambda: all(len(L.window_files(d, "jsonl")) == 2
                                for d in dirs), 10)
    t.check("after the rename, its 2 windows are listed", ok,
            repr([L.window_files(d, "jsonl") for d in dirs]))
    with open(os.path.join(src, ".shardfs-end"), "w"):
        pass
    join(t, "tmp", readers, 30)
    got = ids_per_reader("jsonl", readers)
    t.eq("the renamed chunk is served whole, .hidden.jsonl never",
         sorted(x for g in got for x in g), sorted(ids))
    return t.finish()


# --- e: a shard out of order ---

def order(src: str, tmp: str, mnt: str) -> int:
    t = L.Tally()
    dirs = mount_dirs([mnt], "workers=2")
    readers = start_readers(t, dirs, "jsonl", verify=False)
    rng = random.Random(4)
    ids: Dict[int, List[str]] = {}

    def put(c: int, k: int) -> None:
        data, ids[c] = L.chunk_bytes("jsonl", c, k, rng)
        L.write_chunk(src, L.chunk_name(c, "jsonl"), data)

    put(4, 4)
    put(5, 4)  # window 0 (8 samples) is complete with chunk_00005
    ok = L.wait_for(lambda: all(L.window_files(d, "jsonl") for d in dirs), 10)
    t.check("chunk_00005 in the stream: window 0 listed", ok)
    put(3, 8)
    time.sleep(1.0)
    t.eq("chunk_00003 after chunk_00005: no window of it",
         [L.window_files(d, "jsonl") for d in dirs],
         [["window-00000000.jsonl"]] * len(dirs))
    put(6, 8)
    ok = L.wait_for(lambda: all(len(L.window_files(d, "jsonl")) == 2
                                for d in dirs), 10)
    t.check("chunk_00006 after it: window 1 listed", ok)
    with open(os.path.join(src, ".shardfs-end"), "w"):
        pass
    join(t, "order", readers, 30)
    got = ids_per_reader("jsonl", readers)
    t.eq("served: chunks 4, 5 and 6, never chunk_00003",
         sorted(x for g in got for x in g), sorted(ids[4] + ids[5] + ids[6]))
    return t.finish()


# --- f: a restart mid-stream ---

def restart1(src: str, tmp: str, n: int, opts: str, mnt: str) -> int:
    """Chunks worth 5+ windows; every reader reads exactly 3 windows of
    its stream.  Writes TMP/phase1.json: the chunks, what each reader
    read, consumed."""
    t = L.Tally()
    dirs = mount_dirs([mnt], opts)
    p = Producer(src, "jsonl", 31)
    rng = random.Random(7)
    while sum(p.counts) < 5 * n + 3:
        p.write(rng.randint(1, 20))
    ok = L.wait_for(lambda: all(len(L.window_files(d, "jsonl")) >= 3
                                for d in dirs), 20)
    t.check("phase 1: 3 windows listed", ok)
    read = []
    for d in dirs:
        size = sum(os.stat(os.path.join(d, w)).st_size
                   for w in L.window_files(d, "jsonl")[:3])
        with open(os.path.join(d, "stream.jsonl"), "rb", buffering=0) as f:
            data = L.readn(f, size)
        t.eq("phase 1: %s reads its 3 windows from the stream" % d,
             len(data), size)
        read.append(L.ids_of("jsonl", data))
        L.acknowledge(d, 2)  # windows 0-2 taken
    lw = last_shard_window(p.counts, n)
    want = max([p.chunks[i][0] for i in range(len(lw)) if lw[i] <= 2],
               default="")
    ok = L.wait_for(lambda: L.read_consumed(mnt) == want, 5)
    t.eq("phase 1: consumed is the last shard of windows 0-2",
         L.read_consumed(mnt), want)
    with open(os.path.join(tmp, "phase1.json"), "w") as f:
        json.dump({"chunks": [(a, b.decode()) for a, b in p.chunks],
                   "read": read, "consumed": L.read_consumed(mnt),
                   "next": p.next}, f)
    return t.finish()


def restart2(src: str, tmp: str, n: int, opts: str, mnt: str) -> int:
    t = L.Tally()
    with open(os.path.join(tmp, "phase1.json")) as f:
        ph = json.load(f)
    start = opt(opts, "start", 0)
    earlier = [x for r in ph["read"] for x in r]
    t.eq("phase 1 read start=%d samples" % start, len(earlier), start)
    dirs = mount_dirs([mnt], opts)
    readers = start_readers(t, dirs, "jsonl", first=start // n)
    p = Producer(src, "jsonl", 32, first=ph["next"])
    p.chunks = [(a, b.encode()) for a, b in ph["chunks"]]
    rng = random.Random(8)
    for _ in range(8):
        time.sleep(rng.uniform(0, 0.05))
        p.write(rng.randint(1, 20))
    p.end()
    join(t, "restart", readers, 60)
    produced = [x for _, d in p.chunks for x in L.ids_of("jsonl", d)]
    windows = L.split_stream("jsonl", p.chunks, start, n)
    last_ids = [x for _, d in windows[-1] for x in L.ids_of("jsonl", d)]
    got = ids_per_reader("jsonl", readers)
    check_coverage(t, "restart with start=%d" % start, got, produced,
                   last_ids, earlier)
    want, _ = expected_readers(t, "jsonl", p.chunks, start, n,
                               ",".join(kv for kv in opts.split(",")
                                        if not kv.startswith("start=")),
                               tmp, len(dirs), first_window=start // n)
    for i, r in enumerate(readers):
        t.check("restart: %s reads the plans of windows %d.. (keyed by "
                "their number in the whole stream)" % (r.d, start // n),
                got[i] == want[i], first_diff(got[i], want[i]))
    t.eq("restart: consumed names the last shard at the end",
         L.read_consumed(mnt), p.chunks[-1][0])
    return t.finish()


# --- g: a DDP job over a growing source ---

def ddp(src: str, tmp: str, n: int, batch: int, mnt0: str, mnt1: str) -> int:
    t = L.Tally()
    # the ranks meet in a file store, not on a port picked free here:
    # another test's connections can take it before rank 0 binds it
    store = tempfile.mkdtemp(dir=tmp) + "/store"
    procs = []
    for r, m in enumerate((mnt0, mnt1)):
        env = dict(os.environ, RANK=str(r), WORLD_SIZE="2",
                   DDP_STORE=store)
        procs.append(subprocess.Popen(
            [sys.executable, os.path.join(HERE, "ddp_follow_job.py"),
             m, tmp, "2", str(batch)], env=env, stderr=subprocess.PIPE,
            text=True))
    p = Producer(src, "jsonl", 41)
    rng = random.Random(9)
    # the source grows while the job runs: once every DataLoader worker of
    # both ranks waits in its first read
    ok = L.wait_for(lambda: [w for *_, w in readers_waiting([mnt0, mnt1])]
                    == [True] * 4 or any(q.poll() is not None for q in procs),
                    90, 0.1)
    t.check("the job's 4 loader workers wait on the empty source", ok,
            repr(readers_waiting([mnt0, mnt1])))
    for _ in range(30):
        time.sleep(rng.uniform(0, 0.15))
        p.write(rng.randint(1, 30))
    p.end()
    res = []
    for q in procs:
        try:
            _, err = q.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            for x in procs:
                x.kill()
            err = "killed after 120 s"
        res.append((q.returncode, err))
    t.eq("the DDP job's ranks exit 0", [rc for rc, _ in res], [0, 0]) or \
        print("\n".join(e[-2000:] for _, e in res))
    batches = []
    for r in range(2):
        try:
            with open(os.path.join(tmp, "rank%d.json" % r)) as f:
                batches.append(json.load(f))
        except (OSError, ValueError):
            batches.append([])
    t.check("both ranks take the same number of steps",
            len(batches[0]) == len(batches[1]) and len(batches[0]) > 0,
            "steps: %s" % [len(b) for b in batches])
    t.check("every batch is full", all(len(b) == batch for bs in batches
                                       for b in bs))
    produced = [x for _, d in p.chunks for x in L.ids_of("jsonl", d)]
    windows = L.split_stream("jsonl", p.chunks, 0, n)
    last_ids = [x for _, d in windows[-1] for x in L.ids_of("jsonl", d)]
    got = [[json.loads(x)["id"] for b in bs for x in b] for bs in batches]
    check_coverage(t, "DDP", got, produced, last_ids)
    return t.finish()


def main() -> int:
    a = sys.argv[1:]
    s = a[0]
    if s == "grow":
        return grow(a[1], a[2], a[3], int(a[4]), a[5], a[6:])
    if s == "formats":
        return formats(a[1], a[2], a[3], int(a[4]), a[5], a[6])
    if s == "timeout":
        return timeout(a[1], float(a[2]))
    if s == "tmp":
        return tmp_never(a[1], a[2], a[3])
    if s == "order":
        return order(a[1], a[2], a[3])
    if s == "restart1":
        return restart1(a[1], a[2], int(a[3]), a[4], a[5])
    if s == "restart2":
        return restart2(a[1], a[2], int(a[3]), a[4], a[5])
    if s == "ddp":
        return ddp(a[1], a[2], int(a[3]), int(a[4]), a[5], a[6])
    print("unknown scenario %s" % s, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
