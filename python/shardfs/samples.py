"""The samples of one view file, per format (docs/formats.md says what a
sample is in each).

`samples(path)` picks the reader by the file's extension; each reader is
also usable on its own.  Only the Parquet reader needs a package
(pyarrow), imported when a Parquet file is read.
"""
from __future__ import annotations

import os
import struct
import tarfile
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, Union

from ._mount import ShardfsError

PathLike = Union[str, "os.PathLike[str]"]


def tar_samples(path: PathLike) -> Iterator[Dict[str, Any]]:
    """WebDataset-style samples: consecutive members sharing a key (the
    member's name up to the first dot of its base name) as one dict
    {"__key__": key, "__url__": path, extension: bytes, ...}."""
    name = os.fspath(path)
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
