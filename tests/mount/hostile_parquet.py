"""Hostile but valid Parquet files, for tests/mount/test_hostile.sh and the
fuzz seeds (issue 30, finding 2).

  hostile_parquet.py rowgroups OUT N   N row groups of one INT32 row each:
                                       a footer of ~37 bytes per row group
  hostile_parquet.py bomb OUT MIB      one INT32 column, one GZIP data page
                                       of MIB MiB of zeros (MIB * 256 Ki rows)
  hostile_parquet.py dba OUT N         one BYTE_ARRAY column, one GZIP data
                                       page of N DELTA_BYTE_ARRAY values of
                                       1 MiB, each the one before (a ~2 KB
                                       file of N MiB of values)
  hostile_parquet.py nullrow OUT N     one row of a list of optional INT32,
                                       across N v1 pages of 4 Mi null
                                       elements each (~40 bytes a page)

All are well-formed: every reader takes them; only their shape is hostile.
"""

import struct
import sys
import zlib

I32, I64, BINARY, LIST, STRUCT = 5, 6, 8, 9, 12


def varint(v: int) -> bytes:
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def zigzag(v: int) -> bytes:
    return varint((v << 1) ^ (v >> 63))


class Struct:
    """A Thrift compact struct, fields added in id order."""

    def __init__(self) -> None:
        self.out = bytearray()
        self.last = 0

    def field(self, fid: int, ftype: int) -> None:
        delta = fid - self.last
        assert 0 < delta <= 15
        self.out.append(delta << 4 | ftype)
        self.last = fid

    def int(self, fid: int, ftype: int, v: int) -> "Struct":
        self.field(fid, ftype)
        self.out += zigzag(v)
        return self

    def binary(self, fid: int, v: bytes) -> "Struct":
        self.field(fid, BINARY)
        self.out += varint(len(v)) + v
        return self

    def list(self, fid: int, etype: int, elems: list) -> "Struct":
        self.field(fid, LIST)
        n = len(elems)
        self.out += bytes([n << 4 | etype]) if n < 15 else bytes([0xF0 | etype]) + varint(n)
        for e in elems:
            self.out += e
        return self

    def struct(self, fid: int, s: "Struct") -> "Struct":
        self.field(fid, STRUCT)
        self.out += s.done()
        return self

    def done(self) -> bytes:
        return bytes(self.out) + b"\0"


def page_header(usize: int, csize: int, nvalues: int, enc: int = 0) -> bytes:
    dph = Struct().int(1, I32, nvalues).int(2, I32, enc).int(3, I32, 3).int(4, I32, 3)
    return Struct().int(1, I32, 0).int(2, I32, usize).int(3, I32, csize).struct(5, dph).done()


def chunk(codec: int, nvalues: int, size: int, usize: int, at: int,
          ptype: int = 1, enc: int = 0) -> bytes:
    meta = (Struct().int(1, I32, ptype).list(2, I32, [zigzag(enc)])
            .list(3, BINARY, [varint(1) + b"v"]).int(4, I32, codec)
            .int(5, I64, nvalues).int(6, I64, usize).int(7, I64, size)
            .int(9, I64, at))
    return Struct().int(2, I64, at).struct(3, meta).done()


def footer(rgs: list, rows: int, ptype: int = 1) -> bytes:
    schema = [Struct().binary(4, b"schema").int(5, I32, 1).done(),
              Struct().int(1, I32, ptype).int(3, I32, 0).binary(4, b"v").done()]
    return (Struct().int(1, I32, 1).list(2, STRUCT, schema).int(3, I64, rows)
            .list(4, STRUCT, rgs).done())


def write(path: str, data: bytes, meta: bytes) -> None:
    with open(path, "wb") as f:
        f.write(b"PAR1" + data + meta + struct.pack("<I", len(meta)) + b"PAR1")


def rowgroups(path: str, n: int) -> None:
    data = bytearray()
    rgs = []
    for i in range(n):
        page = page_header(4, 4, 1) + struct.pack("<i", i)
        at = 4 + len(data)
        data += page
        rg = Struct()
        rg.list(1, STRUCT, [chunk(0, 1, len(page), len(page), at)])
        rgs.append(rg.int(2, I64, len(page)).int(3, I64, 1).done())
    write(path, bytes(data), footer(rgs, n))


def bomb(path: str, mib: int) -> None:
    usize = mib << 20
    body = zlib.compressobj(9, zlib.DEFLATED, 31)
    gz = body.compress(bytes(usize)) + body.flush()
    rows = usize // 4
    page = page_header(usize, len(gz), rows) + gz
    rg = Struct()
    rg.list(1, STRUCT, [chunk(2, rows, len(page), usize + len(page) - len(gz), 4)])
    write(path, page, footer([rg.int(2, I64, usize).int(3, I64, rows).done()], rows))


def delta_binary_packed(values: list) -> bytes:
    """DELTA_BINARY_PACKED: blocks of 128 values, 4 miniblocks of 32."""
    out = varint(128) + varint(4) + varint(len(values))
    out += zigzag(values[0] if values else 0)
    deltas = [b - a for a, b in zip(values, values[1:])]
    for at in range(0, len(deltas), 128):
        block = deltas[at:at + 128]
        low = min(block)
        out += zigzag(low)
        minis = [[d - low for d in block[m:m + 32]] for m in range(0, 128, 32)]
        widths = [max(mini).bit_length() if mini else 0 for mini in minis]
        out += bytes(widths)
        for mini, w in zip(minis, widths):
            bits = sum(v << (i * w) for i, v in enumerate(mini))
            out += bits.to_bytes(32 * w // 8, "little")
    return out


def dba(path: str, n: int) -> None:
    mib = 1 << 20
    values = (delta_binary_packed([0] + [mib] * (n - 1))
              + delta_binary_packed([mib] + [0] * (n - 1)) + bytes(range(256)) * 4096)
    body = zlib.compressobj(9, zlib.DEFLATED, 31)
    gz = body.compress(values) + body.flush()
    page = page_header(len(values), len(gz), n, enc=7) + gz
    rg = Struct()
    rg.list(1, STRUCT, [chunk(2, n, len(page), len(values) + len(page) - len(gz), 4,
                              ptype=6, enc=7)])
    write(path, page, footer([rg.int(2, I64, len(values)).int(3, I64, n).done()], n,
                             ptype=6))


def nullrow(path: str, pages: int) -> None:
    n = 4 << 20

    def levels(runs: list) -> bytes:
        b = b"".join(varint(count << 1) + bytes([v]) for count, v in runs)
        return struct.pack("<I", len(b)) + b

    data = b""
    for i in range(pages):
        # repetition 0 only at the row's first element, definition 1: a
        # null element of the list
        rep = [(1, 0), (n - 1, 1)] if i == 0 else [(n, 1)]
        body = levels(rep) + levels([(n, 1)])
        dph = Struct().int(1, I32, n).int(2, I32, 0).int(3, I32, 3).int(4, I32, 3)
        data += Struct().int(1, I32, 0).int(2, I32, len(body)).int(
            3, I32, len(body)).struct(5, dph).done() + body
    meta = (Struct().int(1, I32, 1).list(2, I32, [zigzag(0), zigzag(3)])
            .list(3, BINARY, [varint(1) + b"g", varint(1) + b"v"]).int(4, I32, 0)
            .int(5, I64, n * pages).int(6, I64, len(data)).int(7, I64, len(data))
            .int(9, I64, 4))
    rg = (Struct().list(1, STRUCT, [Struct().int(2, I64, 4).struct(3, meta).done()])
          .int(2, I64, len(data)).int(3, I64, 1).done())
    schema = [Struct().binary(4, b"schema").int(5, I32, 1).done(),
              Struct().int(3, I32, 2).binary(4, b"g").int(5, I32, 1).done(),
              Struct().int(1, I32, 1).int(3, I32, 1).binary(4, b"v").done()]
    write(path, data, Struct().int(1, I32, 1).list(2, STRUCT, schema).int(3, I64, 1)
          .list(4, STRUCT, [rg]).done())


if __name__ == "__main__":
    kind, out, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    {"rowgroups": rowgroups, "bomb": bomb, "dba": dba,
     "nullrow": nullrow}[kind](out, n)
