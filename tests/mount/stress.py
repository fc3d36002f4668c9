#!/usr/bin/env python3
"""Concurrent readers against epoch switches.

Usage: stress.py MNT SRC READERS SECONDS EPOCHS

READERS processes read every file of their worker directory (reader i
reads MNT/<rank>/<worker>/ of reader i modulo the view's readers) over and
over, each pass through a directory descriptor, so it sees one epoch,
while this process writes epoch 0, 1, ..., EPOCHS-1, 0, ... to
MNT/.shardfs/epoch every 100 ms for SECONDS.  Once the readers are done,
one more switch must let every old view go (status: counters.views back
to 1 within 10 s).  A pass that outlives FS_OLD_VIEWS (4) switches may
find its view let go, as docs/view.md says: an EIO then is counted apart
(revoked), any other failure is an error.  SRC is a JSONL source whose
lines carry a unique "key": every line read must be byte for byte the
source's line of that key, and every file must hold exactly the lines its
name promises (<seq>-<shard>.<a>-<b>.jsonl: b - a + 1).  Prints a summary
and exits 1 when any read failed or any byte differed.
"""
import errno
import json
import multiprocessing
import os
import re
import sys
import time


def source_lines(src):
    lines = {}
    for name in os.listdir(src):
        if name.endswith(".jsonl"):
            with open(os.path.join(src, name), "rb") as f:
                for line in f:
                    lines[json.loads(line)["key"]] = line
    return lines


OLD_VIEWS = 4  # src/fuse/fs.h, FS_OLD_VIEWS


def reader(d, lines, stop, switched, out):
    os.nice(19)  # the epoch switches keep their pace on 2 cores
    files = nbytes = passes = revoked = 0
    errors = []
    while time.monotonic() < stop and len(errors) < 10:
        began = switched.value
        try:
            dfd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
        except OSError as e:
            errors.append("open %s: %s" % (d, e))
            continue
        try:
            for name in sorted(os.listdir(dfd)):
                fd = os.open(name, os.O_RDONLY, dir_fd=dfd)
                try:
                    data = b""
                    while True:
                        chunk = os.read(fd, 1 << 20)
                        if not chunk:
                            break
                        data += chunk
                finally:
                    os.close(fd)
                got = data.splitlines(keepends=True)
                m = re.search(r"\.(\d+)-(\d+)\.jsonl$", name)
                want = int(m.group(2)) - int(m.group(1)) + 1 if m else None
                if want is not None and len(got) != want:
                    errors.append("%s: %d lines, its name says %d"
                                  % (name, len(got), want))
                for line in got:
                    if lines.get(json.loads(line)["key"]) != line:
                        errors.append("%s: a line differs from the source"
                                      % name)
                        break
                files += 1
                nbytes += len(data)
            passes += 1
        except OSError as e:
            if (e.errno == errno.EIO
                    and switched.value - began >= OLD_VIEWS):
                revoked += 1  # the view of this pass was let go
            else:
                errors.append("%s: %s (%d switches into the pass)"
                              % (d, e, switched.value - began))
        except ValueError as e:
            errors.append("%s: %s" % (d, e))
        finally:
            os.close(dfd)
    out.put((passes, files, nbytes, errors, revoked))


def views(mnt):
    with open(os.path.join(mnt, ".shardfs", "status")) as f:
        return json.load(f)["counters"]["views"]


def switch(mnt, epoch):
    with open(os.path.join(mnt, ".shardfs", "epoch"), "w") as f:
        f.write(str(epoch))


def main():
    mnt, src = sys.argv[1], sys.argv[2]
    nreaders, seconds, epochs = (int(a) for a in sys.argv[3:6])
    status = json.load(open(os.path.join(mnt, ".shardfs", "status")))
    dirs = [os.path.join(mnt, str(r["rank"]), str(r["worker"]))
            for r in status["plan"]["readers"]]
    lines = source_lines(src)
    stop = time.monotonic() + seconds
    out = multiprocessing.Queue()
    switched = multiprocessing.Value("l", 0)
    procs = [multiprocessing.Process(target=reader, args=(
        dirs[i % len(dirs)], lines, stop, switched, out))
        for i in range(nreaders)]
    for p in procs:
        p.start()
    switches, slowest, most, due = 0, 0.0, 0, time.monotonic()
    while True:
        due += 0.1
        if due >= stop:
            break
        time.sleep(max(0.0, due - time.monotonic()))
        switches += 1
        began = time.monotonic()
        switch(mnt, switches % epochs)
        switched.value = switches
        slowest = max(slowest, time.monotonic() - began)
        most = max(most, views(mnt))
    results = [out.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    switch(mnt, (switches + 1) % epochs)
    settle = time.monotonic() + 10
    while views(mnt) > 1 and time.monotonic() < settle:
        time.sleep(0.1)
    left = views(mnt)
    passes = sum(r[0] for r in results)
    files = sum(r[1] for r in results)
    nbytes = sum(r[2] for r in results)
    errors = [e for r in results for e in r[3]]
    revoked = sum(r[4] for r in results)
    idle = sum(1 for r in results if r[0] == 0)
    print("%d readers, %d s, %d epoch switches (the slowest took %.0f ms): "
          "%d directory passes, %d files, %.1f MB read and checked against "
          "the source, %d errors, %d passes outlived their view; at most "
          "%d views alive, %d after"
          % (nreaders, seconds, switches, slowest * 1e3, passes, files,
             nbytes / 1e6, len(errors), revoked, most, left))
    for e in errors[:10]:
        print("FAIL: " + e)
    if idle:
        print("FAIL: %d readers finished no pass" % idle)
    if left != 1:
        print("FAIL: %d views alive 10 s after the readers ended" % left)
    return 1 if errors or idle or not switches or left != 1 else 0


if __name__ == "__main__":
    sys.exit(main())
