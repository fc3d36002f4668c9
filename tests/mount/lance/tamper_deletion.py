#!/usr/bin/env python3
"""Tamper with a Roaring deletion file (portable format, no run
containers, as Lance and shardfs write them) without making it invalid:
the first deleted row that a live row follows changes places with it, so
the file still deletes as many rows, in order, once each, but another
row is live.  Prints the two rows.  Usage: tamper_deletion.py FILE."""
import struct
import sys

path = sys.argv[1]
b = bytearray(open(path, "rb").read())
cookie, n = struct.unpack_from("<II", b, 0)
if cookie != 12346:
    sys.exit(f"{path}: not a Roaring bitmap without run containers")
hdr = [struct.unpack_from("<HH", b, 8 + 4 * i) for i in range(n)]
offs = [struct.unpack_from("<I", b, 8 + 4 * n + 4 * i)[0] for i in range(n)]
for (key, card1), off in zip(hdr, offs):
    card = card1 + 1
    if card <= 4096:  # an array container: sorted u16 values
        vals = list(struct.unpack_from(f"<{card}H", b, off))
        s = set(vals)
        for i, v in enumerate(vals):
            if v < 65535 and v + 1 not in s:
                vals[i] = v + 1
                struct.pack_into(f"<{card}H", b, off, *vals)
                break
        else:
            continue
    else:  # a bitset container: 8 KiB
        bits = b[off:off + 8192]
        for v in range(65535):
            if bits[v >> 3] >> (v & 7) & 1 and not bits[(v + 1) >> 3] >> ((v + 1) & 7) & 1:
                b[off + (v >> 3)] &= ~(1 << (v & 7)) & 0xFF
                b[off + ((v + 1) >> 3)] |= 1 << ((v + 1) & 7)
                break
        else:
            continue
    open(path, "wb").write(b)
    print(f"row {key << 16 | v} live, row {(key << 16 | v) + 1} deleted")
    sys.exit(0)
sys.exit(f"{path}: no deleted row followed by a live one")
