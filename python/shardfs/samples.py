"""The samples of one view file, per format (docs/formats.md says what a
sample is in each).

`samples(path)` picks the reader by the file's extension; each reader is
also usable on its own.  Only the Parquet reader needs a package
(pyarrow), imported when a Parquet file is read.
"""
from __future__ import annotations

import os
import stat
import struct
import sys
import tarfile
from pathlib import Path
from typing import (Any, Callable, Dict, Iterator, List, Optional, Tuple,
                    Union)
from zlib import adler32

from ._mount import ShardfsError

PathLike = Union[str, "os.PathLike[str]"]


def tar_samples(path: PathLike) -> Iterator[Dict[str, Any]]:
    """WebDataset-style samples: consecutive members sharing a key (the
    member's name up to the first dot of its base name) as one dict
    {"__key__": key, "__url__": path, extension: bytes, ...}.

    A `.tar` is read by this module's own reader (`tar_members`: the
    members tarfile would give, several times faster); any other name
    (`.tgz`, `.tar.gz`) by tarfile, which decompresses."""
    name = os.fspath(path)
    if not name.endswith(".tar"):
        yield from _tarfile_samples(name)
        return
    sample: Dict[str, Any] = {}
    key = None
    for member, data in tar_members(name):
        if "/" in member:
            base = os.path.basename(member)
            stem, _, ext = base.partition(".")
            k = os.path.join(os.path.dirname(member), stem)
        else:
            k, _, ext = member.partition(".")
        if k != key:
            if sample:
                yield sample
            sample = {"__key__": k, "__url__": name}
            key = k
        sample[ext] = data
    if sample:
        yield sample


def _tarfile_samples(name: str) -> Iterator[Dict[str, Any]]:
    """tar_samples read by tarfile: compressed tars (and the reference
    the tests hold tar_members to)."""
    # "r:" for plain tars: "r:*" would open the file again to probe for
    # each compression, and every open of a view file may be a round trip
    mode = "r:" if name.endswith(".tar") else "r:*"
    try:
        tar = tarfile.open(name, mode)
    except (tarfile.TarError, OSError) as e:
        raise ShardfsError("%s: not a readable tar (%s): check it with "
                           "shardfs-check view" % (name, e)) from None
    with tar:
        sample: Dict[str, Any] = {}
        for member in tar:
            if not member.isfile():
                continue
            base = os.path.basename(member.name)
            key, _, ext = base.partition(".")
            key = os.path.join(os.path.dirname(member.name), key)
            if sample and sample["__key__"] != key:
                yield sample
                sample = {}
            if not sample:
                sample = {"__key__": key, "__url__": name}
            f = tar.extractfile(member)
            assert f is not None  # a regular member
            sample[ext] = f.read()
        if sample:
            yield sample


# The uncompressed tar reader.  It follows CPython's tarfile (3.11, pax
# records as read since 3.11.10) member by member: the same headers give
# the same names, sizes and data, and the same members count as files.  Where tarfile would stop silently (a bad
# checksum or a truncated header after the first member) or fail later
# with its own error, this raises ShardfsError naming the byte.
_BLOCK = 512
_ZERO_BLOCK = bytes(_BLOCK)
# Headers and small members are read in chunks of _CHUNK; a member of
# _DIRECT bytes or more that runs past the chunk is read by itself,
# straight into the bytes given (slicing it from a chunk copies it once
# more, joining chunks a third time: half the CPU of image-sized samples,
# docs/benchmarks.md, "Over S3")
_CHUNK = 1 << 16
_DIRECT = 1 << 15
_EXT_MAX = 1 << 24  # bound on a pax or GNU long-name header's data
# tarfile's REGULAR_TYPES but GNU sparse ('S'), refused below
_REGULAR = frozenset((b"0", b"\0", b"7"))
# types tarfile knows to have no data (links, devices, directories,
# FIFOs): it does not skip their size; unknown types are skipped by it
_NO_DATA = frozenset((b"1", b"2", b"3", b"4", b"5", b"6"))
_EXTENSIONS = frozenset((b"L", b"K", b"x", b"X", b"g"))
_PAX_NAME_FIELDS = frozenset(("path", "linkpath", "uname", "gname"))


def _bad(name: str, what: str, at: int) -> ShardfsError:
    return ShardfsError("%s: %s at byte %d: not a readable tar (check it "
                        "with shardfs-check view; if the source changed, "
                        "re-index it)" % (name, what, at))


def _number(field: bytes) -> Optional[int]:
    """A header's numeric field as tarfile reads it (octal text, or GNU
    base-256 when its first byte is 0x80 or 0xff); None if invalid."""
    if field[0] in (0o200, 0o377):
        n = int.from_bytes(field[1:], "big")
        if field[0] == 0o377:
            n -= 256 ** (len(field) - 1)
        return n
    end = field.find(b"\0")
    if end >= 0:
        field = field[:end]
    try:
        return int(field.decode("ascii").strip() or "0", 8)
    except (UnicodeDecodeError, ValueError):
        return None


def _padded(size: int) -> int:
    return (size + _BLOCK - 1) // _BLOCK * _BLOCK


def _string(field: bytes, encoding: str) -> str:
    """A NUL-terminated name field (tarfile's nts)."""
    end = field.find(b"\0")
    if end >= 0:
        field = field[:end]
    return field.decode(encoding, "surrogateescape")


def _checksum_ok(header: bytes, stored: int) -> bool:
    # the unsigned sum, the checksum field counted as spaces; adler32's
    # low half is 1 + the byte sum of at most 256 bytes, exactly (no
    # wrap below 65521): much faster than sum() over 512 ints
    unsigned = ((adler32(header[:256]) & 0xFFFF)
                + (adler32(header[256:]) & 0xFFFF) - 2
                - sum(header[148:156]) + 256)
    if stored == unsigned:
        return True
    # some old tars summed signed chars: tarfile accepts both
    return stored == 256 + sum(struct.unpack_from("148b8x356b", header))


def _decode(value: bytes, encoding: str, fallback: str) -> str:
    try:
        return value.decode(encoding, "strict")
    except UnicodeDecodeError:
        return value.decode(fallback, "surrogateescape")


def _pax(data: bytes, headers: Dict[str, str], encoding: str,
         bad: Callable[[str, int], ShardfsError]) -> Dict[str, str]:
    """The records of a pax header added to `headers`, as tarfile's
    _proc_pax reads them since the fix of CVE-2024-6232 (3.11.10, 3.12.6):
    each record's length digits are read, then the record is sliced, so
    the cost is linear in the header (a regex over the whole header was
    quadratic: a 200 KB header took minutes).  A record that is not
    "LENGTH KEYWORD=VALUE\n" raises bad(what, offset in data)."""
    pos = 0
    charset = None
    records: List[Tuple[bytes, bytes]] = []
    while pos < len(data) and data[pos] != 0:
        # at most 20 digits, then a space (tarfile's _header_length_prefix_re)
        space = data.find(b" ", pos, pos + 21)
        digits = data[pos:space]
        if space < 0 or not digits or not digits.isdigit():
            raise bad("a record that does not start with its length",
                      pos)
        length = int(digits)
        if length < 5:
            raise bad("a record of length %d (less than 5)" % length,
                      pos)
        if pos + length > len(data):
            raise bad("a record of %d bytes past the end of the header"
                      % length, pos)
        last = pos + length - 1
        keyword, equals, value = data[space + 1:last].partition(b"=")
        if not keyword or not equals or data[last] != 0x0A:
            raise bad("a record of %d bytes that is not "
                      "\"KEYWORD=VALUE\" and a newline" % length, pos)
        records.append((keyword, value))
        # only the first hdrcharset counts, as tarfile reads it
        if keyword == b"hdrcharset" and charset is None:
            charset = encoding if value == b"BINARY" else "utf-8"
        pos += length
    names = charset or "utf-8"
    for keyword, value in records:
        key = _decode(keyword, "utf-8", "utf-8")
        if key in _PAX_NAME_FIELDS:
            headers[key] = _decode(value, names, encoding)
        else:
            headers[key] = _decode(value, "utf-8", "utf-8")
    return headers


def _apply_pax(headers: Dict[str, str], path: str, size: int
               ) -> Tuple[str, int]:
    """path and size after a pax header (tarfile's _apply_pax_info)."""
    for keyword, value in headers.items():
        if keyword == "path":
            path = value.rstrip("/")
        elif keyword == "size":
            try:
                size = int(value)
            except ValueError:
                size = 0
    return path, size


def _more(fd: int, buf: bytes, pos: int, need: int, off: int) -> bytes:
    """buf[pos:] and what follows it in fd from its file offset `off`: at
    least `need` bytes unless the file ends first; reads a chunk at
    least."""
    have = len(buf) - pos
    parts = [buf[pos:]] if have else []
    while have < need:
        chunk = os.pread(fd, max(need - have, _CHUNK), off)
        if not chunk:
            break
        parts.append(chunk)
        have += len(chunk)
        off += len(chunk)
    return parts[0] if len(parts) == 1 else b"".join(parts)


def _read_exactly(fd: int, size: int, off: int) -> bytes:
    """size bytes of fd at off (fewer if the file ends first), read
    straight into the bytes returned: one copy from the page cache."""
    data = os.pread(fd, size, off)
    if len(data) == size or not data:
        return data
    parts = [data]
    have = len(data)
    while have < size:
        chunk = os.pread(fd, size - have, off + have)
        if not chunk:
            break
        parts.append(chunk)
        have += len(chunk)
    return b"".join(parts)


def tar_members(path: PathLike) -> Iterator[Tuple[str, bytes]]:
    """(name, data) of every regular member of an uncompressed tar, in
    order: the members, names and data tarfile gives for it (ustar
    prefixes, pax `x`/`g` path and size, GNU `L` long names; octal or
    base-256 numbers; links, directories and devices skipped).  Read in
    64 KiB chunks, a member of 32 KiB or more by itself.  Raises
    ShardfsError, naming the byte, for a header that is truncated or has
    a bad checksum or size, data past the end of the file (checked
    before it is read), and GNU sparse members (which shards do not
    hold)."""
    name = os.fspath(path)
    encoding = sys.getfilesystemencoding()
    glob: Dict[str, str] = {}  # the `g` headers so far
    # the extension headers before the next member: (type, offset, value)
    pending: List[Tuple[bytes, int, Any]] = []
    with open(name, "rb", buffering=0) as f:
        fd = f.fileno()
        st = os.fstat(fd)
        # a member's size is checked against the file's before its data
        # is read: a header claiming a terabyte allocates nothing
        fsize = st.st_size if stat.S_ISREG(st.st_mode) else None
        buf = b""
        pos = 0   # the next header, in buf
        base = 0  # the file offset of buf[0]
        while True:
            if len(buf) - pos < _BLOCK:
                buf = _more(fd, buf, pos, _BLOCK, base + len(buf))
                base += pos
                pos = 0
                if len(buf) < _BLOCK:
                    if buf:
                        raise _bad(name, "truncated header", base)
                    if pending:
                        raise _bad(name, "end of file after the extended "
                                   "header", pending[-1][1])
                    if base == 0:
                        raise _bad(name, "empty file", 0)
                    return
            at = base + pos
            header = buf[pos:pos + _BLOCK]
            if header == _ZERO_BLOCK:
                if pending:
                    raise _bad(name, "end-of-archive block after the "
                               "extended header", pending[-1][1])
                return
            stored = _number(header[148:156])
            if stored is None or not _checksum_ok(header, stored):
                raise _bad(name, "header with a bad checksum", at)
            kind = header[156:157]
            size = _number(header[124:136])
            if size is None or size < 0:
                raise _bad(name, "header with an invalid size", at)
            data_at = pos + _BLOCK
            if kind in _EXTENSIONS:
                if size > _EXT_MAX:
                    raise _bad(name, "extended header of %d bytes (more "
                               "than %d)" % (size, _EXT_MAX), at)
                end = data_at + _padded(size)
                if len(buf) < end:
                    buf = _more(fd, buf, pos, end - pos, base + len(buf))
                    base, data_at, end, pos = at, _BLOCK, end - pos, 0
                    if len(buf) < end:
                        raise _bad(name, "truncated extended header", at)
                data = buf[data_at:end]
                if kind == b"L" or kind == b"K":
                    value: Any = _string(data, encoding)
                else:
                    def bad(what: str, where: int) -> ShardfsError:
                        return _bad(name, "pax header \"%s\" at byte %d "
                                    "(of the member at byte %d): %s"
                                    % (_string(header[:100], encoding), at,
                                       at + _BLOCK + _padded(size), what),
                                    at + _BLOCK + where)
                    value = _pax(data, glob if kind == b"g" else
                                 glob.copy(), encoding, bad)
                    if any(k.startswith("GNU.sparse.") for k in value):
                        raise _bad(name, "GNU sparse member (not read "
                                   "here: pass samples= a tarfile reader)",
                                   at)
                pending.append((kind, at, value))
                pos = end
                continue
            if kind == b"S":
                raise _bad(name, "GNU sparse member (not read here: pass "
                           "samples= a tarfile reader)", at)
            member = _string(header[:100], encoding)
            if kind == b"\0" and member.endswith("/"):
                kind = b"5"  # a V7 directory
            if header[345]:  # a ustar prefix
                member = _string(header[345:500], encoding) + "/" + member
            skip = kind not in _NO_DATA
            next_at = data_at + (_padded(size) if skip else 0)
            if glob:
                member, size = _apply_pax(glob, member, size)
            if pending:
                # the header nearest the member first, as tarfile's
                # recursion patches it
                for ext, _, value in reversed(pending):
                    if ext == b"L":
                        member = value
                    elif ext != b"K" and ext != b"g":
                        member, size = _apply_pax(value, member, size)
                        if "size" in value:
                            if size < 0:
                                raise _bad(name, "pax header with a "
                                           "negative size", at)
                            next_at = data_at + (_padded(size) if skip
                                                 else 0)
                pending = []
            regular = kind in _REGULAR
            if size < 0:
                raise _bad(name, "header with a negative size", at)
            end = max(next_at, data_at + size) if regular else next_at
            if len(buf) < end and fsize is not None and base + end > fsize:
                fsize = os.fstat(fd).st_size  # unless it grew
                if base + end > fsize:
                    raise _bad(name, "member data past the end of the "
                               "file (%d bytes from the header)"
                               % (end - pos - _BLOCK), at)
            if (len(buf) < end and regular and size >= _DIRECT
                    and next_at >= data_at + size):
                # a large member past the buffer: its data read straight
                # into the bytes given (a slice of a joined buffer would
                # copy it twice more), then a chunk from its end on
                data = _read_exactly(fd, size, base + data_at)
                pad = next_at - data_at - size
                base += data_at + size
                buf = _more(fd, b"", 0, pad + _BLOCK, base) \
                    if len(data) == size else b""
                if len(buf) < pad or len(data) < size:
                    raise _bad(name, "member data past the end of the "
                               "file (%d bytes from the header)"
                               % (next_at - pos - _BLOCK), at)
                yield member, data
                pos = pad
                continue
            if len(buf) < end:
                buf = _more(fd, buf, pos, end - pos, base + len(buf))
                base, data_at, next_at, end, pos = (
                    at, data_at - pos, next_at - pos, end - pos, 0)
                if len(buf) < end:
                    raise _bad(name, "member data past the end of the "
                               "file (%d bytes from the header)"
                               % (end - _BLOCK), at)
            if regular:
                yield member, buf[data_at:data_at + size]
            pos = next_at


def line_samples(path: PathLike) -> Iterator[bytes]:
    """Every line (bytes, with its newline: a slice ends every line with
    one) of a JSONL or text file."""
    with open(path, "rb") as f:
        yield from f


def tfrecord_samples(path: PathLike) -> Iterator[bytes]:
    """The data of every record (u64 length, u32 CRC, data, u32 CRC; the
    CRCs are not checked here: the index's hashes are)."""
    name = os.fspath(path)
    with open(name, "rb") as f:
        offset = 0
        while True:
            head = f.read(12)
            if not head:
                return
            if len(head) < 12:
                raise ShardfsError(
                    "%s: truncated TFRecord header at byte %d: the file "
                    "changed under the mount, re-index the source"
                    % (name, offset))
            (length,) = struct.unpack("<Q", head[:8])
            data = f.read(length)
            tail = f.read(4)
            if len(data) < length or len(tail) < 4:
                raise ShardfsError(
                    "%s: TFRecord record at byte %d claims %d bytes past "
                    "the end of the file: the file changed under the "
                    "mount, re-index the source" % (name, offset, length))
            offset += 16 + length
            yield data


def parquet_samples(path: PathLike, batch_rows: int = 1024
                    ) -> Iterator[Dict[str, Any]]:
    """Every row as a dict, in file order, read with pyarrow batch by
    batch."""
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise ShardfsError("%s: reading Parquet needs pyarrow: pip install "
                           "pyarrow" % os.fspath(path)) from None
    pf = pq.ParquetFile(os.fspath(path))
    for batch in pf.iter_batches(batch_size=batch_rows):
        yield from batch.to_pylist()


READERS: Dict[str, Callable[[PathLike], Iterator[Any]]] = {
    ".tar": tar_samples,
    ".tgz": tar_samples,
    ".tar.gz": tar_samples,
    ".jsonl": line_samples,
    ".json": line_samples,
    ".txt": line_samples,
    ".tfrecord": tfrecord_samples,
    ".tfrecords": tfrecord_samples,
    ".parquet": parquet_samples,
}


def reader_for(path: PathLike) -> Callable[[PathLike], Iterator[Any]]:
    """The sample reader of a file, by its extension (READERS)."""
    name = Path(path).name
    for ext in sorted(READERS, key=len, reverse=True):
        if name.endswith(ext):
            return READERS[ext]
    raise ShardfsError(
        "%s: no sample reader for this extension (known: %s): pass "
        "samples=your_reader to the dataset"
        % (path, " ".join(sorted(READERS))))


def samples(path: PathLike) -> Iterator[Any]:
    """The samples of one file, by its extension: tar -> dicts by key,
    jsonl/txt -> lines, tfrecord -> record bytes, parquet -> row dicts."""
    return reader_for(path)(path)
