"""Writing one shard: its files appended to as tokens arrive, checksummed and hashed block by
block on the way, then synced and renamed into place, so a shard file that exists under its name
is complete."""

from __future__ import annotations

import hashlib
import os
import pathlib
from collections.abc import Sequence
from typing import Any, BinaryIO

import numpy as np

from ._blocks import BlockHasher
from ._format import MASK, PAIRS, STARTS, TOKENS, shard_file

_ONES = np.ones(1 << 20, np.uint8)


class _File:
    """An append-only file written under a temporary name, with its running sha256 and block
    hashes."""

    def __init__(self, root: pathlib.Path, name: str) -> None:
        self.name = name
        self.final = root / name
        self.tmp = self.final.with_name(self.final.name + ".tmp")
        self.final.parent.mkdir(parents=True, exist_ok=True)
        self.handle: BinaryIO = open(self.tmp, "wb")  # noqa: SIM115 - closed by finish/abort
        self.digest = hashlib.sha256()
        self.blocks = BlockHasher()
        self.size = 0

    def write(self, data: np.ndarray) -> None:
        view = memoryview(np.ascontiguousarray(data)).cast("B")
        self.handle.write(view)
        self.digest.update(view)
        self.blocks.update(view)
        self.size += view.nbytes

    def finish(self) -> dict[str, Any]:
        self.handle.flush()
        os.fsync(self.handle.fileno())
        self.handle.close()
        os.replace(self.tmp, self.final)
        return {
            "name": self.name,
            "bytes": self.size,
            "sha256": self.digest.hexdigest(),
            "blocks": self.blocks.finish(),
        }

    def abort(self) -> None:
        self.handle.close()
        self.tmp.unlink(missing_ok=True)


class ShardWriter:
    """One shard of one split: ``append`` documents' tokens, then ``finish`` (or ``abort``)."""

    def __init__(self, root: pathlib.Path, split: str, index: int) -> None:
        self.root, self.split, self.index = root, split, index
        self.tokens: _File | None = None  # opened by the first document
        self.mask: _File | None = None
        self.starts: list[np.ndarray] = []
        self.num_tokens = 0
        self.documents = 0
        self.examples = 0
        self.pairs: list[np.ndarray] | None = None  # [n, 2] per append, once a pair came
        self.origins: list[list[Any]] = []  # [first document, file] where the file changes

    def append(
        self,
        tokens: np.ndarray,
        lengths: np.ndarray,
        mask: np.ndarray | None,
        examples: int,
        pairs: np.ndarray | None = None,
        origins: Sequence[str] = (),
    ) -> None:
        """Documents of ``lengths`` tokens, one after another in ``tokens``; ``mask`` their
        tokens' loss weights (``None``: every token counts); ``pairs`` the chosen side's length
        of each preference pair (0: not a pair) and ``origins`` their ids (``file:line``)."""
        if not len(lengths):
            return
        if pairs is not None:
            self._add_pairs(pairs, origins)
        elif self.pairs is not None:
            self.pairs.append(np.zeros((len(lengths), 2), np.int64))
        if self.tokens is None:
            self.tokens = _File(self.root, shard_file(self.split, self.index, TOKENS))
        if mask is not None and self.mask is None:
            # The first example of the shard: the plain tokens before it all count.
            self.mask = _File(self.root, shard_file(self.split, self.index, MASK))
            for at in range(0, self.num_tokens, len(_ONES)):
                self.mask.write(_ONES[: min(len(_ONES), self.num_tokens - at)])
        if self.mask is not None:
            self.mask.write(mask if mask is not None else np.ones(len(tokens), np.uint8))
        self.starts.append(self.num_tokens + np.cumsum(lengths) - lengths)
        self.tokens.write(tokens)
        self.num_tokens += len(tokens)
        self.documents += len(lengths)
        self.examples += examples

    def _add_pairs(self, pairs: np.ndarray, origins: Sequence[str]) -> None:
        if self.pairs is None:  # the first pair of the shard: the documents before it are not
            self.pairs = [np.zeros((self.documents, 2), np.int64)]
        lines = np.zeros(len(pairs), np.int64)
        for i, origin in enumerate(origins):
            name, _, line = origin.rpartition(":")
            lines[i] = int(line) if line.isdigit() else 0
            name = name if line.isdigit() else origin
            if not self.origins or self.origins[-1][1] != name:
                self.origins.append([self.documents + i, name])
        self.pairs.append(np.stack([np.asarray(pairs, np.int64), lines], axis=1))

    def finish(self) -> dict[str, Any]:
        """Sync and publish the shard's files; its manifest record (``None`` files when empty)."""
        record: dict[str, Any] = {
            "split": self.split,
            "index": self.index,
            "documents": self.documents,
            "tokens": self.num_tokens,
            "examples": self.examples,
            "files": [],
        }
        if self.tokens is None:
            return record
        starts = _File(self.root, shard_file(self.split, self.index, STARTS))
        extra = []
        try:
            starts.write(np.concatenate(self.starts).astype(np.int64))
            if self.pairs is not None:
                pairs = np.concatenate(self.pairs)
                extra.append(_File(self.root, shard_file(self.split, self.index, PAIRS)))
                extra[0].write(pairs)
                record["pairs"] = int((pairs[:, 0] > 0).sum())
                record["origins"] = self.origins
            files = [self.tokens, starts, *([self.mask] if self.mask is not None else []), *extra]
            record["files"] = [f.finish() for f in files]
        except BaseException:
            starts.abort()
            for f in extra:
                f.abort()
            self.abort()
            raise
        return record

    def abort(self) -> None:
        """Drop what was written."""
        for f in (self.tokens, self.mask):
            if f is not None:
                f.abort()
