#!/usr/bin/env python3
"""Forge a Lance manifest whose fragments claim more rows than their data
files hold (a review's hostile manifest: 604 bytes claiming 2 x 2^32
rows): every fragment's physical_rows (DataFragment field 4) becomes
ROWS, everything else is kept byte for byte, the lengths around it
re-encoded.  Usage: forge_rows.py MANIFEST ROWS (rewritten in place)."""
import struct
import sys


def varint(v: int) -> bytes:
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        out.append(b | 0x80 if v else b)
        if not v:
            return bytes(out)


def read_varint(b: bytes, i: int) -> tuple[int, int]:
    v = shift = 0
    while True:
        c = b[i]
        i += 1
        v |= (c & 0x7F) << shift
        shift += 7
        if not c & 0x80:
            return v, i


def fields(b: bytes):
    """(number, wire, raw key+value bytes, value bytes or int)"""
    i = 0
    while i < len(b):
        start = i
        key, i = read_varint(b, i)
        num, wire = key >> 3, key & 7
        if wire == 0:
            v, i = read_varint(b, i)
        elif wire == 2:
            n, i = read_varint(b, i)
            v, i = b[i:i + n], i + n
        elif wire == 1:
            v, i = b[i:i + 8], i + 8
        elif wire == 5:
            v, i = b[i:i + 4], i + 4
        else:
            sys.exit(f"wire type {wire}")
        yield num, wire, b[start:i], v


def fragment(b: bytes, rows: int) -> bytes:
    out = bytearray()
    for num, wire, raw, v in fields(b):
        out += varint(4 << 3) + varint(rows) if (num, wire) == (4, 0) else raw
    return bytes(out)


path, rows = sys.argv[1], int(sys.argv[2])
f = open(path, "rb").read()
pos = struct.unpack_from("<Q", f, len(f) - 16)[0]
n = struct.unpack_from("<I", f, pos)[0]
man = f[pos + 4:pos + 4 + n]
out = bytearray()
for num, wire, raw, v in fields(man):
    if (num, wire) == (2, 2):
        fr = fragment(v, rows)
        out += varint(2 << 3 | 2) + varint(len(fr)) + fr
    else:
        out += raw
open(path, "wb").write(f[:pos] + struct.pack("<I", len(out)) + out +
                       f[pos + 4 + n:])
