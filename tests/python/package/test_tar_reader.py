"""The fast tar reader of shardfs.samples (tar_members, behind
tar_samples) against the tarfile-based one it replaced: exactly the same
sample dicts over shardfs-mkdata shards, tars written by tarfile in GNU,
pax and ustar formats, hand-patched headers (base-256 sizes, signed
checksums) and the spliced slices of a real mount; and the exact errors
of malformed files, where tarfile stops silently or fails later."""
from __future__ import annotations

import io
import json
import os
import struct
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Dict, List, Sequence, Tuple

import pytest

import shardfs
from shardfs.samples import _tarfile_samples, tar_members, tar_samples
from helpers import run


def assert_same(path: Path) -> int:
    """tar_samples equals the tarfile reader on path; the sample count."""
    old = list(_tarfile_samples(str(path)))
    new = list(tar_samples(path))
    assert new == old, path
    return len(old)


def write_tar(path: Path, fmt: int, members: Sequence[Tuple[str, bytes]],
              pax_headers: Dict[str, str] = None) -> Path:
    """A tar of regular members (name, data) and, for names ending in
    '/' or '@', directories and symlinks."""
    with tarfile.open(path, "w", format=fmt,
                      pax_headers=pax_headers or {}) as tar:
        for name, data in members:
            info = tarfile.TarInfo(name.rstrip("/@"))
            if name.endswith("/"):
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            elif name.endswith("@"):
                info.type = tarfile.SYMTYPE
                # long (a GNU K header, a pax linkpath) but in ustar
                info.linkname = "x" * (90 if fmt == tarfile.USTAR_FORMAT
                                       else 150)
                tar.addfile(info)
            else:
                info.size = len(data)
                info.mtime = 1700000000
                tar.addfile(info, io.BytesIO(data))
    return path


def members(prefix: str, n: int) -> List[Tuple[str, bytes]]:
    """n samples of 2-3 members each, some empty, some in directories."""
    out: List[Tuple[str, bytes]] = []
    for i in range(n):
        key = "%s%06d" % (prefix, i)
        if i % 7 == 3:
            out.append((key.rsplit("/", 1)[0] + "/", b""))  # a directory
        out.append((key + ".bin", bytes([i % 256]) * (i * 37 % 1500)))
        out.append((key + ".cls", b"" if i % 5 == 0 else str(i).encode()))
        if i % 3 == 0:
            out.append((key + ".meta.json", b'{"i": %d}' % i))
        if i % 11 == 5:
            out.append((key + ".lnk@", b""))
    return out


@pytest.mark.parametrize("args", [
    ["--shards", "3", "--samples", "20-150", "--size", "0-3000"],
    ["--shards", "2", "--samples", "5-60", "--size", "100-1000",
     "--members", "1-3", "--seed", "7"],
    ["--shards", "2", "--samples", "10-40", "--size", "0-700",
     "--long-names", "--seed", "5"],
])
def test_mkdata_shards_read_the_same(tmp_path: Path, args: List[str]
                                     ) -> None:
    run("shardfs-mkdata", str(tmp_path), "--format", "tar", *args)
    shards = sorted(tmp_path.glob("*.tar"))
    assert shards and all(assert_same(s) > 0 for s in shards)


LONG = "d" * 60 + "/" + "e" * 70 + "/"


@pytest.mark.parametrize("fmt,prefix", [
    (tarfile.GNU_FORMAT, LONG + "sample-"),       # GNU L and K headers
    (tarfile.PAX_FORMAT, LONG + "échantillon-ü"),  # pax path, UTF-8
    (tarfile.PAX_FORMAT, "日本/サンプル-"),          # non-ASCII, short
    (tarfile.USTAR_FORMAT, "p" * 90 + "/q" * 20 + "/s-"),  # ustar prefix
    (tarfile.GNU_FORMAT, "plain-"),
])
def test_tarfile_formats_read_the_same(tmp_path: Path, fmt: int,
                                       prefix: str) -> None:
    path = write_tar(tmp_path / "a.tar", fmt, members(prefix, 60))
    assert assert_same(path) == 60


def test_pax_global_headers_read_the_same(tmp_path: Path) -> None:
    path = write_tar(tmp_path / "g.tar", tarfile.PAX_FORMAT,
                     members("k-", 20), {"comment": "shard 0"})
    assert assert_same(path) == 20
    # a global path renames every member after it, as tarfile reads it
    path = write_tar(tmp_path / "gp.tar", tarfile.PAX_FORMAT,
                     members("k-", 5), {"path": "all.same/"})
    assert [s["__key__"] for s in tar_samples(path)] == ["all"]
    assert assert_same(path) == 1


def test_empty_archive_and_empty_members(tmp_path: Path) -> None:
    path = write_tar(tmp_path / "e.tar", tarfile.GNU_FORMAT, [])
    assert assert_same(path) == 0
    path = write_tar(tmp_path / "z.tar", tarfile.PAX_FORMAT,
                     [("a.x", b""), ("a.y", b""), ("b.x", b"")])
    assert assert_same(path) == 2


def patch_header(path: Path, offset: int, start: int, field: bytes,
                 signed: bool = False) -> None:
    """Write field into the header at offset and fix its checksum."""
    data = bytearray(path.read_bytes())
    h = data[offset:offset + 512]
    h[start:start + len(field)] = field
    h[148:156] = b" " * 8
    if signed:
        chk = 256 + sum(struct.unpack_from("148b8x356b", bytes(h)))
    else:
        chk = sum(h)
    h[148:156] = b"%06o\0 " % chk
    data[offset:offset + 512] = h
    path.write_bytes(bytes(data))


def test_base256_sizes_and_signed_checksums(tmp_path: Path) -> None:
    path = write_tar(tmp_path / "n.tar", tarfile.USTAR_FORMAT,
                     [("a.x", b"hello"), ("a.y", b"abc" * 300),
                      ("b.x", b"z")])
    # a.y's size (900) as GNU base-256, b.x's header summed signed (a
    # name byte >= 0x80 makes the two sums differ)
    patch_header(path, 1024, 124, b"\x80" + (900).to_bytes(11, "big"))
    patch_header(path, 1024 + 512 + 1024, 0, b"b\xe9.x", signed=True)
    assert tarfile.open(path).getmembers()[1].size == 900
    assert assert_same(path) == 2
    got = list(tar_samples(path))
    assert got[0]["y"] == b"abc" * 300
    assert got[1]["__key__"] == "b\udce9"


def test_unknown_types_are_skipped_by_size(tmp_path: Path) -> None:
    with tarfile.open(tmp_path / "u.tar", "w",
                      format=tarfile.GNU_FORMAT) as tar:
        for name, kind, data in [("a.x", tarfile.REGTYPE, b"1"),
                                 ("vol", b"V", b"label" * 200),
                                 ("a.y", tarfile.CONTTYPE, b"2"),
                                 ("b.x", tarfile.AREGTYPE, b"3")]:
            info = tarfile.TarInfo(name)
            info.type, info.size = kind, len(data)
            tar.addfile(info, io.BytesIO(data))
    assert assert_same(tmp_path / "u.tar") == 2


def test_compressed_tars_still_use_tarfile(tmp_path: Path) -> None:
    path = tmp_path / "c.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        for name, data in members("c-", 4):
            if not name.endswith(("/", "@")):
                info = tarfile.TarInfo(name)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    assert len(list(shardfs.samples(path))) == 4


@pytest.fixture
def sound(tmp_path: Path) -> Path:
    """Three members of 700, 10 and 0 bytes: headers at 0, 1536, 2560;
    the end-of-archive blocks at 3072."""
    return write_tar(tmp_path / "m.tar", tarfile.USTAR_FORMAT,
                     [("a.x", b"1" * 700), ("a.y", b"2" * 10),
                      ("b.x", b"")])


def error_of(path: Path) -> str:
    with pytest.raises(shardfs.ShardfsError) as e:
        list(tar_samples(path))
    return str(e.value)


def message(path: Path, what: str) -> str:
    return ("%s: %s: not a readable tar (check it with shardfs-check view; "
            "if the source changed, re-index it)" % (path, what))


def test_malformed_tars_raise_naming_the_byte(sound: Path) -> None:
    data = sound.read_bytes()
    assert len(list(tar_samples(sound))) == 2
    cases = [
        (data[:1536 + 100], "truncated header at byte 1536"),
        (data[:1536 + 512 + 4],
         "member data past the end of the file (512 bytes from the "
         "header) at byte 1536"),
        (data[:512 + 300],
         "member data past the end of the file (1024 bytes from the "
         "header) at byte 0"),
        (data[:2560] + b"?" + data[2561:],
         "header with a bad checksum at byte 2560"),
        (data[:1536 + 124] + b"9" + data[1536 + 125:],
         "header with a bad checksum at byte 1536"),
        (b"", "empty file at byte 0"),
    ]
    for i, (bad, what) in enumerate(cases):
        path = sound.with_name("bad%d.tar" % i)
        path.write_bytes(bad)
        assert error_of(path) == message(path, what)
    # an invalid size with a right checksum
    path = sound.with_name("size.tar")
    path.write_bytes(data)
    patch_header(path, 1536, 124, b"0000000001x\0")
    assert error_of(path) == message(path, "header with an invalid size "
                                     "at byte 1536")


def test_malformed_extended_headers(tmp_path: Path) -> None:
    path = write_tar(tmp_path / "x.tar", tarfile.PAX_FORMAT,
                     [("é" * 80 + ".x", b"1")])
    data = path.read_bytes()
    # the pax header, its data, then the member's header at 1024
    cut = tmp_path / "cut.tar"
    cut.write_bytes(data[:1024])
    assert error_of(cut) == message(cut, "end of file after the extended "
                                    "header at byte 0")
    zero = tmp_path / "zero.tar"
    zero.write_bytes(data[:1024] + bytes(1024))
    assert error_of(zero) == message(zero, "end-of-archive block after "
                                     "the extended header at byte 0")
    short = tmp_path / "short.tar"
    short.write_bytes(data[:700])
    assert error_of(short) == message(short, "truncated extended header "
                                      "at byte 0")


# members of 32 KiB or more that run past the 64 KiB chunk are read by
# themselves, straight into their bytes: sizes around both bounds, with
# and without padding, after small members and one another
BIG = [32767, 32768, 32769, 65023, 65024, 65536, 65537, 100000, 300000,
       (1 << 20) + 3]


def big_members(prefix: str) -> List[Tuple[str, bytes]]:
    out: List[Tuple[str, bytes]] = []
    for i, n in enumerate(BIG + BIG[::-1]):
        key = "%s%03d" % (prefix, i)
        out.append((key + ".bin", bytes([i]) * 7 + os.urandom(n - 7)))
        if i % 3:
            out.append((key + ".cls", str(i).encode()))
    return out


@pytest.mark.parametrize("fmt", [tarfile.GNU_FORMAT, tarfile.PAX_FORMAT])
def test_large_members_read_the_same(tmp_path: Path, fmt: int) -> None:
    want = big_members(LONG + "big-")
    path = write_tar(tmp_path / "big.tar", fmt, want)
    assert assert_same(path) == 2 * len(BIG)
    assert list(tar_members(path)) == want


def test_large_member_cut_short_raises_naming_the_byte(
        tmp_path: Path) -> None:
    """One member of 40000 bytes (40448 padded) at byte 0, then b.x at
    40960: cut before its data, in it, right after it, in its
    padding."""
    path = write_tar(tmp_path / "l.tar", tarfile.USTAR_FORMAT,
                     [("a.x", b"7" * 40000), ("b.x", b"8")])
    data = path.read_bytes()
    assert list(tar_members(path)) == [("a.x", b"7" * 40000),
                                       ("b.x", b"8")]
    for i, cut in enumerate((512, 512 + 30000, 512 + 40000,
                             512 + 40000 + 10)):
        bad = tmp_path / ("cut%d.tar" % i)
        bad.write_bytes(data[:cut])
        assert error_of(bad) == message(
            bad, "member data past the end of the file (40448 bytes "
            "from the header) at byte 0")
    # cut in the next member's header: the first member is given
    bad = tmp_path / "next.tar"
    bad.write_bytes(data[:40960 + 100])
    with pytest.raises(shardfs.ShardfsError) as e:
        for name, got in tar_members(bad):
            assert (name, got) == ("a.x", b"7" * 40000)
    assert str(e.value) == message(bad, "truncated header at byte 40960")


def test_a_claimed_terabyte_allocates_nothing(sound: Path) -> None:
    """A base-256 size of 2**40 in a 3 KB file: an error naming the
    header, not a terabyte asked of malloc (a MemoryError before)."""
    patch_header(sound, 1536, 124, b"\x80" + (1 << 40).to_bytes(11, "big"))
    assert error_of(sound) == message(
        sound, "member data past the end of the file (%d bytes from the "
        "header) at byte 1536" % (1 << 40))


def index_and_mount(src: Path, mount, opts: str) -> List[Path]:
    run("shardfs-index", str(src), "--quiet")
    m = shardfs.Mount(mount(src, opts))
    return [f for r in m.ranks for w in range(m.workers)
            for f in m.files(r, w)]


def test_mounted_view_slices_read_the_same(tmp_path: Path, mount) -> None:
    """block= cuts the shards into slices the daemon splices (the shard's
    global headers, the samples' records, end-of-archive blocks)."""
    src = tmp_path / "src"
    run("shardfs-mkdata", str(src), "--format", "tar", "--shards", "4",
        "--samples", "10-60", "--size", "0-2000", "--long-names",
        "--seed", "11")
    for i in range(2):
        write_tar(src / ("pax-%d.tar" % i), tarfile.PAX_FORMAT,
                  members(LONG + "ü-%d-" % i, 25), {"comment": "g%d" % i})
        write_tar(src / ("gnu-%d.tar" % i), tarfile.GNU_FORMAT,
                  members(LONG + "g-%d-" % i, 25))
    write_tar(src / "big.tar", tarfile.GNU_FORMAT, big_members("big-"))
    files = index_and_mount(src, mount,
                            "world=2,workers=2,block=3,shuffle=samples,"
                            "seed=2")
    assert len(files) > 8
    total = sum(assert_same(f) for f in files)
    assert total > 100
    assert all(os.path.getsize(f) % 512 == 0 for f in files)


def test_tar_members_gives_names_and_data(sound: Path) -> None:
    assert list(tar_members(sound)) == [("a.x", b"1" * 700),
                                        ("a.y", b"2" * 10), ("b.x", b"")]


# pax records: read as tarfile reads them since the fix of CVE-2024-6232,
# one record at a time by its length, never by a regex over the header

def pax_tar(path: Path, records: bytes, kind: bytes = b"x",
            member: str = "a.x", data: bytes = b"1") -> Path:
    """A tar of one pax header of `kind` holding `records`, then the
    member (a ustar header and its data): the pax header at byte 0, its
    records at 512."""
    info = tarfile.TarInfo("PaxHeader/" + member)
    info.type, info.size = kind, len(records)
    out = info.tobuf(tarfile.USTAR_FORMAT)
    out += records + bytes(-len(records) % 512)
    info = tarfile.TarInfo(member)
    info.size = len(data)
    out += info.tobuf(tarfile.USTAR_FORMAT) + data + bytes(-len(data) % 512)
    path.write_bytes(out + bytes(1024))
    return path


def record(keyword: bytes, value: bytes, width: int = 0) -> bytes:
    """One pax record, its length written with at least `width` digits."""
    body = b" %s=%s\n" % (keyword, value)
    n = len(body) + 1
    while len(b"%0*d" % (width, n)) + len(body) != n:
        n += 1
    return b"%0*d" % (width, n) + body


def tarfile_members(path: Path) -> List[Tuple[str, bytes]]:
    with tarfile.open(path, "r:") as tar:
        return [(m.name, tar.extractfile(m).read())  # type: ignore
                for m in tar if m.isfile()]


@pytest.mark.parametrize("records,kind,member,want", [
    # hdrcharset=BINARY: path (a name field) in the file system's
    # encoding, not UTF-8; it counts wherever it is in the header
    (record(b"hdrcharset", b"BINARY") + record(b"path", b"b\xe9.x"),
     b"x", "a.x", "b\udce9.x"),
    (record(b"path", b"b\xe9.x") + record(b"hdrcharset", b"BINARY"),
     b"x", "a.x", "b\udce9.x"),
    # only the first hdrcharset counts
    (record(b"hdrcharset", b"ISO-IR 10646 2000 UTF-8")
     + record(b"hdrcharset", b"BINARY") + record(b"path", b"\xc3\xa9.x"),
     b"x", "a.x", "é.x"),
    # values holding '=' and newlines; an empty value; zeros before a
    # length (20 digits at most); a global path
    (record(b"comment", b"a=b\nc=") + record(b"path", b"k.y")
     + record(b"foo", b""), b"x", "a.x", "k.y"),
    (record(b"path", b"z.x", width=20), b"x", "a.x", "z.x"),
    (record(b"path", b"g.x"), b"g", "a.x", "g.x"),
    (record(b"size", b"2"), b"x", "a.x", "a.x"),
])
def test_pax_records_read_as_tarfile_reads_them(
        tmp_path: Path, records: bytes, kind: bytes, member: str,
        want: str) -> None:
    path = pax_tar(tmp_path / "p.tar", records, kind, member, b"abc")
    got = list(tar_members(path))
    assert got == tarfile_members(path)
    assert got[0][0] == want


# tarfile refuses these since its fix (at byte 0: ReadError)
TARFILE_FIXED = hasattr(tarfile, "_header_length_prefix_re")


@pytest.mark.parametrize("records,at,what", [
    (b" foo=bar\n", 512, "a record that does not start with its length"),
    (b"-12 foo=bar\n", 512, "a record that does not start with its length"),
    (b"0" * 25 + b"36 foo=bar\n", 512,
     "a record that does not start with its length"),
    (b"4 x=\n", 512, "a record of length 4 (less than 5)"),
    (b"0 foo=bar\n", 512, "a record of length 0 (less than 5)"),
    (b"1000000 foo=bar\n", 512,
     "a record of 1000000 bytes past the end of the header"),
    (record(b"path", b"k.x") + b"9 foobar\n", 524,
     'a record of 9 bytes that is not "KEYWORD=VALUE" and a newline'),
    (b"7 =bar\n", 512,
     'a record of 7 bytes that is not "KEYWORD=VALUE" and a newline'),
    (b"10 foo=barx\n", 512,
     'a record of 10 bytes that is not "KEYWORD=VALUE" and a newline'),
])
def test_malformed_pax_records_raise_naming_the_byte(
        tmp_path: Path, records: bytes, at: int, what: str) -> None:
    path = pax_tar(tmp_path / "bad.tar", records)
    assert error_of(path) == message(
        path, 'pax header "PaxHeader/a.x" at byte 0 (of the member at '
        "byte 1024): %s at byte %d" % (what, at))
    if TARFILE_FIXED:
        with pytest.raises(tarfile.ReadError):
            tarfile.open(path, "r:").getmembers()


# tar_members in a process of its own: the seconds it took, its peak of
# traced memory, and the members (or the error) as JSON
TIMED = """
import json, sys, time, tracemalloc
import shardfs
from shardfs.samples import tar_members
tracemalloc.start()
start = time.monotonic()
try:
    out = [[n, d.decode()] for n, d in tar_members(sys.argv[1])]
except shardfs.ShardfsError as e:
    out = str(e)
print(json.dumps({"seconds": time.monotonic() - start, "result": out,
                  "peak": tracemalloc.get_traced_memory()[1]}))
"""


# (built in the test: a parameter of 200 KB would be the test's id, in
# the environment of every process it starts)
CRAFTED = {
    # a valid record whose value is 200 000 digits: a regex that looked
    # for "\d+ hdrcharset=" anywhere took 246 s here (CVE-2024-6232)
    "digits": lambda: record(b"comment", b"0" * 200000),
    # 10 000 records "20 aaa...": a regex that matched "KEYWORD=" up to
    # the one "=" at the end kept a key of ~100 KB for each: 6 s, 969 MB
    "keys": lambda: (b"20 " + b"a" * 17) * 10000 + b"=x\n",
}


@pytest.mark.parametrize("name", sorted(CRAFTED))
def test_pax_records_cost_linear_time(tmp_path: Path, name: str) -> None:
    """Two 198 KiB tars that shardfs-index accepts (libarchive skips the
    records it cannot read) are read, or refused, in milliseconds."""
    src = tmp_path / "src"
    src.mkdir()
    path = pax_tar(src / (name + ".tar"), CRAFTED[name]())
    run("shardfs-index", str(src), "--quiet")
    try:
        p = subprocess.run([sys.executable, "-c", TIMED, str(path)],
                           capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        raise AssertionError("tar_members(%s) took more than 60 s" % path)
    assert p.returncode == 0, p.stderr
    got = json.loads(p.stdout)
    assert got["seconds"] < 2
    assert got["peak"] < 32 << 20
    if name == "digits":
        # (not compared with tarfile: before its fix, it takes minutes)
        assert got["result"] == [["a.x", "1"]]
    else:
        assert got["result"] == message(
            path, 'pax header "PaxHeader/a.x" at byte 0 (of the member at '
            'byte 200704): a record of 20 bytes that is not '
            '"KEYWORD=VALUE" and a newline at byte 512')
