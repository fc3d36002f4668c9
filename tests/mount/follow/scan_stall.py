"""Reads of a complete window while the watcher scans a big chunk
(test_follow_security.sh): python3 scan_stall.py SRC MNT BIG.  Writes
BIG one-byte lines under a temporary name, reads MNT/0/0's window 0 every
5 ms, renames the chunk into SRC and waits until its windows are listed
(the scan's duration); prints it, the worst read, and OK when the worst
read took under a third of the scan (BLOCKED otherwise: the reads waited
for the scan).  Speeds are measured, not asserted."""
import os, sys, time, threading, json
src, mnt, big = sys.argv[1], sys.argv[2], int(sys.argv[3])
win = os.path.join(mnt, "0", "0", "window-00000000.jsonl")
status = os.path.join(mnt, ".shardfs", "status")
with open(os.path.join(src, ".big.tmp"), "wb") as f:
    f.write(b"1\n" * big)
lat = []
stop = threading.Event()
def reader():
    while not stop.is_set():
        t = time.monotonic()
        with open(win, "rb") as f:
            f.read()
        lat.append(time.monotonic() - t)
        time.sleep(0.005)
th = threading.Thread(target=reader); th.start()
time.sleep(0.3)
t0 = time.monotonic()
os.rename(os.path.join(src, ".big.tmp"), os.path.join(src, "c1.jsonl"))
while True:
    # the listing shows the big chunk's windows once it is scanned
    if len(os.listdir(os.path.join(mnt, "0", "0"))) > 2:
        break
    time.sleep(0.01)
scan = time.monotonic() - t0
stop.set(); th.join()
worst = max(lat)
print("scan %.2f s, %d reads, worst %.3f s" % (scan, len(lat), worst))
print("OK" if worst < scan / 3 else "BLOCKED")
