"""Content hashes of a store's files, block by block: written as a shard is written, checked by
the reader the first time it reads a block and by ``zoo data verify``.

Every shard file is cut into blocks of :data:`BLOCK_BYTES` (the last one shorter), each hashed
with xxHash's XXH3 (64 bits): a corruption check, not a defence against forgery, at about 10
GB/s on one core. A 16 × 1,025-token batch reads 16 rows of about 2 KB (uint16 ids) at random
places: with 1 MiB blocks it touches 16–32 blocks, hashes at most 16–32 MiB the first time
(about 2 ms, once per block per process), and the manifest holds 16 hex digits per MiB of data.
"""

from __future__ import annotations

import os
from typing import Any

import xxhash

BLOCK_BYTES = 1 << 20
ALGORITHM = "xxh3_64"


def block_info(manifest: dict[str, Any]) -> dict[str, Any] | None:
    """The store's block hashing (``{"bytes", "hash"}``), or ``None`` for a store made before
    stores carried block hashes."""
    return manifest.get("blocks")


def hash_bytes(data: Any) -> str:
    """The hex digest of one block (bytes or a buffer)."""
    return xxhash.xxh3_64_hexdigest(data)


def block_range(index: int, size: int, block_bytes: int) -> tuple[int, int]:
    """``[start, stop)`` bytes of block ``index`` of a file of ``size`` bytes."""
    start = index * block_bytes
    return start, min(start + block_bytes, size)


class BlockHasher:
    """The running block hashes of a file written from its start, in pieces of any size."""

    def __init__(self, block_bytes: int = BLOCK_BYTES) -> None:
        self.block_bytes = block_bytes
        self.digests: list[str] = []
        self._state = xxhash.xxh3_64()
        self._filled = 0  # bytes of the current block so far

    def update(self, data: memoryview) -> None:
        """Add the next bytes of the file."""
        at = 0
        while at < len(data):
            take = min(len(data) - at, self.block_bytes - self._filled)
            self._state.update(data[at : at + take])
            self._filled += take
            at += take
            if self._filled == self.block_bytes:
                self._close_block()

    def _close_block(self) -> None:
        self.digests.append(self._state.hexdigest())
        self._state.reset()
        self._filled = 0

    def finish(self) -> list[str]:
        """The hashes of every block (the last, partial one included)."""
        if self._filled:
            self._close_block()
        return self.digests


class DamagedStoreError(ValueError):
    """A block of a store's file does not match the hash recorded when it was prepared.

    Attributes:
        store: the store directory.
        name: the file, relative to the store (``train/00000.tokens``).
        start, stop: the damaged block's bytes ``[start, stop)``.
    """

    def __init__(self, store: str, name: str, start: int, stop: int) -> None:
        self.store, self.name, self.start, self.stop = store, name, start, stop
        super().__init__(
            f"The token store {store!r} is damaged: bytes {start:,}-{stop - 1:,} of its shard "
            f"file {name} do not match the hash recorded when it was prepared; prepare it again "
            "(`zoo data prepare ... --overwrite`) or restore it from a good copy, and run "
            "`zoo data verify` on it before training."
        )


class BlockCheck:
    """The blocks of one open file: each one's expected hash and whether it was checked.

    :meth:`check` is called before a read of bytes ``[start, stop)``; a block is read and hashed
    the first time a read touches it, never again. Threads may share it: at worst two of them
    check the same block once each.
    """

    def __init__(
        self, fd: int, store: str, name: str, size: int, digests: list[str], block_bytes: int
    ) -> None:
        self.fd, self.store, self.name, self.size = fd, store, name, size
        self.block_bytes = block_bytes
        self.shift = block_bytes.bit_length() - 1  # a power of two: a shift, not a division
        if 1 << self.shift != block_bytes:
            raise ValueError(f"Block size {block_bytes} is not a power of two.")
        self.expected = [int(d, 16) for d in digests]
        self.done = bytearray(len(digests))
        self.left = len(digests)  # blocks not checked yet: at 0 the reader drops the check

    def check(self, start: int, stop: int) -> None:
        """Check the blocks of bytes ``[start, stop)`` not checked yet.

        Raises:
            DamagedStoreError: a block does not match its hash.
        """
        first, last = start >> self.shift, (stop - 1) >> self.shift
        done = self.done
        if last - first <= 1 and done[first] and done[last]:  # the common case: nothing to do
            return
        for index in range(first, last + 1):
            if not done[index]:
                self._check_block(index)

    def _check_block(self, index: int) -> None:
        start, stop = block_range(index, self.size, self.block_bytes)
        data = os.pread(self.fd, stop - start, start)
        if len(data) != stop - start or xxhash.xxh3_64_intdigest(data) != self.expected[index]:
            raise DamagedStoreError(self.store, self.name, start, stop)
        if not self.done[index]:
            self.done[index] = 1
            self.left -= 1
