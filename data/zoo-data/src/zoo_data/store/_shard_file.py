"""One shard file of a store, read by positioned reads, each block checked against its hash the
first time a read touches it."""

from __future__ import annotations

import os
import pathlib
from collections.abc import Callable
from typing import Any

import numpy as np

from ._blocks import BlockCheck


class ShardFile:
    """One shard file read by positioned reads (``pread``): what a row needs comes from the page
    cache or the disk, and the process's memory does not grow with what it has read (a
    memory map's touched pages count as the reader's resident memory, readahead included).
    With ``check``, each block of the file is checked against its hash the first time a read
    touches it."""

    def __init__(
        self, path: pathlib.Path, dtype: np.dtype, check: Callable[[int], BlockCheck] | None = None
    ) -> None:
        self.path, self.dtype = path, np.dtype(dtype)
        self.fd = os.open(path, os.O_RDONLY)
        self.blocks = None if check is None else check(self.fd)

    def read_into(self, out: np.ndarray, offset: int) -> None:
        """Fill ``out`` (contiguous, this file's dtype) from item ``offset`` on.

        Raises:
            DamagedStoreError: a block read does not match its hash.
        """
        start = offset * self.dtype.itemsize
        if self.blocks is not None and out.nbytes:
            self.blocks.check(start, start + out.nbytes)
            if not self.blocks.left:  # every block checked: reads cost nothing more from now
                self.blocks = None
        got = os.preadv(self.fd, [out], start)
        if got != out.nbytes:
            raise ValueError(
                f"The shard {str(self.path)!r} is shorter than its manifest says (it changed "
                "after the store was opened); prepare the store again."
            )

    def read_all(self) -> np.ndarray:
        """The whole file as a 1-D array (checked, as :meth:`read_into`)."""
        out = np.empty(os.fstat(self.fd).st_size // self.dtype.itemsize, self.dtype)
        self.read_into(out, 0)
        return out

    def close(self) -> None:
        """Close the file (reading it again is an error)."""
        fd, self.fd = getattr(self, "fd", None), None
        if fd is not None:
            os.close(fd)

    def __del__(self) -> None:
        self.close()


def checker(
    root: pathlib.Path, record: dict[str, Any], blocks: dict[str, Any] | None
) -> Callable[[int], BlockCheck] | None:
    """How to check a file of ``record`` (``None``: it carries no block hashes)."""
    digests = record.get("blocks")
    if blocks is None or digests is None:
        return None
    return lambda fd: BlockCheck(
        fd, str(root), record["name"], record["bytes"], digests, blocks["bytes"]
    )


def read_whole(file: ShardFile) -> np.ndarray:
    """The whole of ``file`` (checked), which is closed after."""
    try:
        return file.read_all()
    finally:
        file.close()
