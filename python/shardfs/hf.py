"""Hugging Face `datasets`: the rows of a streaming dataset read in the
process that iterates, never split again among DataLoader workers.

A `datasets.IterableDataset` is a torch IterableDataset, and iterated
inside a DataLoader worker it gives that worker only its share of the
dataset's files (`datasets` 3 and 5 alike: worker w of n keeps files w,
w + n, ...; a worker with no file of its own reads nothing).  A shardfs
reader's directory is already the worker's share: a recipe that loads one
file (or one reader's files) and iterates it inside a worker then loses
the rows of every file that `datasets` deals to the other workers.
`IterableDataset.iter(batch_size=...)`, the public batched iterator,
does no such split; `rows()` reads through it and yields single rows.

Importing this module imports nothing beyond the standard library; the
dataset given is a `datasets` object already.
"""
from __future__ import annotations

from typing import Any, Dict, Iterator


def rows(dataset: Any, batch_size: int = 1024) -> Iterator[Dict[str, Any]]:
    """Every row of `dataset` (a `datasets.IterableDataset`, e.g.
    `load_dataset(..., streaming=True)`, or a map-style
    `datasets.Dataset`), in order, as dicts, in this process: inside a
    DataLoader worker too, where iterating the dataset itself would read
    only the files `datasets` gives that worker."""
    if batch_size < 1:
        raise ValueError("shardfs.hf.rows: batch_size=%r must be a positive "
                         "integer" % (batch_size,))
    for batch in dataset.iter(batch_size=batch_size):
        columns = list(batch)
        if not columns:
            continue
        for i in range(len(batch[columns[0]])):
            yield {c: batch[c][i] for c in columns}
