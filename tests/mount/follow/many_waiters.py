"""Reads that wait hold no thread (test_follow_security.sh): python3
many_waiters.py SRC MNT N.  N threads open MNT/0/0/stream.jsonl and read
past what it holds (each waits: its window is not complete); then a read
of MNT/0/0/window-00000000.jsonl, timed.  Prints the time it took, "fast"
under a second (else "slow"), then ends the stream (SRC/.shardfs-end)
and prints how many of the waiting reads ended, and with what."""
import os
import sys
import threading
import time

src, mnt, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
d = os.path.join(mnt, "0", "0")
size = os.stat(os.path.join(d, "stream.jsonl")).st_size
results = []


def wait_read() -> None:
    fd = os.open(os.path.join(d, "stream.jsonl"), os.O_RDONLY)
    try:
        results.append(len(os.pread(fd, 4096, size)))
    except OSError as e:
        results.append(e.strerror)
    finally:
        os.close(fd)


threads = [threading.Thread(target=wait_read, daemon=True) for _ in range(n)]
for t in threads:
    t.start()
time.sleep(2)  # every one in its read (parked, or holding a thread)
t0 = time.monotonic()
with open(os.path.join(d, "window-00000000.jsonl"), "rb") as f:
    data = f.read()
took = time.monotonic() - t0
print("window read: %d bytes in %.3f s" % (len(data), took), flush=True)
print("fast" if took < 1.0 else "slow", flush=True)
with open(os.path.join(src, ".shardfs-end"), "w"):
    pass
for t in threads:
    t.join(20)
print("%d of %d waiting reads ended: %s" % (
    len(results), n, sorted(set(map(str, results)))), flush=True)
