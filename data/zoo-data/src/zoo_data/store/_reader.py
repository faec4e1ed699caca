"""Reading a store: shards read by row, and rows of it as training batches.

A split's shards read as one token stream. Rows are spans of it, ``seq_len + 1`` tokens wide:

- plain text: windows ``[r * seq_len, r * seq_len + seq_len + 1)``, so every token but the
  first is a target exactly once per epoch, with no packing pass at all;
- stores with chat or prompt/completion examples: whole documents packed into rows, in order,
  once when the layout is made (a document longer than a row is cut to one row, counted in
  ``truncated``); the rest of a row is padding.

Segment ids and positions come from the documents' starts, as packing makes them
(:func:`~zoo_data.rows_to_batch`), so a target never crosses a document boundary.

Stores of preference pairs are packed by whole pairs (a pair longer than a row is skipped, and
named, never cut), each side its own segment: in a row, segment ``2k - 1`` is the chosen side
of the row's ``k``-th pair and segment ``2k`` its rejected side. With reference
log-probabilities attached (:attr:`TokenSplit.reference`), a batch also holds ``ref_logps``
(float32 ``[B, T]``): each side's reference log-probability at its first position, 0 elsewhere,
so summing it per segment gives each side's value.
"""

from __future__ import annotations

import bisect
import dataclasses
import os
import pathlib
from typing import Any

import numpy as np

from .._packing import Batch, rows_to_batch, segments_from_starts
from .._tokenizer import Tokenizer
from ._blocks import block_info
from ._format import MASK, PAIRS, STARTS, TOKENS
from ._identity import TOKENIZER_DIR, stored_tokenizer, tokenizer_identity
from ._shard_file import ShardFile, checker, read_whole
from ._verify import check_store


class TokenSplit:
    """One split (``train`` or ``eval``) of a store: its shards read as one token stream.

    With ``blocks`` (the manifest's block hashing, ``None`` for a store without), every block
    of a shard file is checked against its hash the first time it is read: document starts and
    pairs as the split opens, tokens and loss weights as rows are read (so in the thread that
    reads them, a training run's prefetch thread).
    """

    def __init__(
        self,
        root: pathlib.Path,
        shards: list[dict[str, Any]],
        dtype: np.dtype,
        key: str = "",
        blocks: dict[str, Any] | None = None,
    ) -> None:
        self.key = key  # the store's fingerprint and the split's name: what names it in a run
        self.dtype = np.dtype(dtype)
        self.tokens: list[ShardFile] = []
        self.masks: list[ShardFile | None] = []
        starts: list[np.ndarray] = []
        pairs: list[np.ndarray] = []
        self.root = root
        self.offsets = [0]
        self._origins: list[tuple[int, str]] = []
        for shard in shards:
            files = {f["name"].rsplit(".", 1)[1]: f for f in shard["files"]}

            def opened(what: str, dtype: Any, files: dict = files) -> ShardFile:
                return ShardFile(
                    root / files[what]["name"], dtype, checker(root, files[what], blocks)
                )

            self.tokens.append(opened(TOKENS, self.dtype))
            self.masks.append(opened(MASK, np.uint8) if MASK in files else None)
            starts.append(read_whole(opened(STARTS, np.int64)) + self.offsets[-1])
            first = sum(len(s) for s in starts[:-1])
            if PAIRS in files:
                pairs.append(read_whole(opened(PAIRS, np.int64)).reshape(-1, 2))
                self._origins += [(first + d, name) for d, name in shard.get("origins", [])]
            else:
                pairs.append(np.zeros((len(starts[-1]), 2), np.int64))
            self.offsets.append(self.offsets[-1] + shard["tokens"])
        self.num_tokens = self.offsets[-1]
        # 8 bytes per document in memory: the boundaries every row's segments come from.
        self.starts = np.concatenate(starts) if starts else np.zeros(0, np.int64)
        self.num_documents = len(self.starts)
        self.weighted = any(m is not None for m in self.masks)
        self.examples = sum(s["examples"] for s in shards)
        self.pairs = sum(s.get("pairs", 0) for s in shards)
        # Per document: the chosen side's length of a preference pair (0: not a pair), its line.
        self.pair_info: np.ndarray | None = np.concatenate(pairs) if self.pairs else None
        #: Reference log-probabilities ``[documents, 2]`` (chosen, rejected) of a pair split,
        #: added to its batches as ``ref_logps`` when set.
        self.reference: np.ndarray | None = None

    @property
    def checked(self) -> bool:
        """Whether reads are checked against block hashes (until every block has been)."""
        return any(f.blocks is not None for f in self.tokens)

    def origin(self, doc: int) -> str:
        """Where pair ``doc`` came from: ``file:line``."""
        names = [name for first, name in self._origins if first <= doc]
        line = 0 if self.pair_info is None else int(self.pair_info[doc, 1])
        return f"{names[-1] if names else self.root}:{line}"

    def close(self) -> None:
        """Close the shard files."""
        for f in [*self.tokens, *self.masks]:
            if f is not None:
                f.close()

    def document(self, i: int) -> tuple[np.ndarray, np.ndarray | None]:
        """The tokens of document ``i`` and their loss weights (``None``: the split has no
        examples, every token counts)."""
        end = self.starts[i + 1] if i + 1 < self.num_documents else self.num_tokens
        return self.span(int(self.starts[i]), int(end - self.starts[i]))

    def span(self, begin: int, length: int) -> tuple[np.ndarray, np.ndarray | None]:
        """Tokens (and weights, uint8) of ``[begin, begin + length)``, across shards if need be."""
        tokens = np.empty(length, self.dtype)
        weights = np.ones(length, np.uint8) if self.weighted else None
        at = 0
        s = bisect.bisect_right(self.offsets, begin) - 1
        while at < length:
            lo = begin + at - self.offsets[s]
            take = min(length - at, self.offsets[s + 1] - self.offsets[s] - lo)
            self.tokens[s].read_into(tokens[at : at + take], lo)
            mask = self.masks[s]
            if mask is not None and weights is not None:
                mask.read_into(weights[at : at + take], lo)
            at, s = at + take, s + 1
        return tokens, weights

    def read(self, begin: np.ndarray, length: np.ndarray, width: int, pad_id: int) -> Batch:
        """The rows ``[begin[i], begin[i] + length[i])`` (int64 ``[B]``, lengths at most
        ``width``) as a batch of ``width - 1`` tokens (see :func:`rows_to_batch`), padded."""
        rows = len(begin)
        raw = np.zeros((rows, width), self.dtype)
        weights = np.zeros((rows, width), np.float32) if self.weighted else None
        offsets, shards = self.offsets, self.tokens
        for i, (a, n) in enumerate(zip(begin.tolist(), length.tolist(), strict=True)):
            s = bisect.bisect_right(offsets, a) - 1
            if a + n <= offsets[s + 1] and weights is None:  # the common case, kept short
                shards[s].read_into(raw[i, :n], a - offsets[s])
                continue
            row, weight = self.span(a, n)
            raw[i, :n] = row
            if weights is not None and weight is not None:
                weights[i, :n] = weight
        tokens = raw.astype(np.int32)
        padding = None
        if (length < width).any():
            padding = np.arange(width)[None, :] >= length[:, None]
            tokens[padding] = pad_id
        # Documents starting inside each row (after its first token) begin new segments.
        end = begin + length
        lo = np.searchsorted(self.starts, begin, side="right")
        count = np.searchsorted(self.starts, end, side="left") - lo
        which = np.repeat(np.arange(rows), count)
        first = np.cumsum(count) - count
        doc = np.arange(len(which)) - np.repeat(first, count) + np.repeat(lo, count)
        cols = self.starts[doc] - begin[which]
        extra: dict[str, np.ndarray] = {}
        if self.pair_info is not None:
            which, cols, extra = self._sides(begin, end, width)
        if len(cols) > 2 * rows or padding is not None or self.pair_info is not None:
            starts = np.zeros((rows, width), bool)
            starts[:, 0] = True
            starts[which, cols] = True
            segment_ids, positions = segments_from_starts(starts, padding)
        else:  # windows over long documents: a few boundaries, each a slice
            segment_ids, positions = _few_segments(rows, width, which.tolist(), cols.tolist())
        return {**rows_to_batch(tokens, segment_ids, positions, weights), **extra}

    def _sides(
        self, begin: np.ndarray, end: np.ndarray, width: int
    ) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
        """Rows ``which`` and columns ``cols`` where the sides of the pairs in rows
        ``[begin, end)`` start (rows begin with a pair), and ``ref_logps`` when attached."""
        rows = len(begin)
        lo = np.searchsorted(self.starts, begin, side="left")
        count = np.searchsorted(self.starts, end, side="left") - lo
        which = np.repeat(np.arange(rows), count)
        doc = np.arange(len(which)) - np.repeat(np.cumsum(count) - count, count)
        doc = doc + np.repeat(lo, count)
        cols = self.starts[doc] - begin[which]
        assert self.pair_info is not None
        sides = cols + self.pair_info[doc, 0]
        extra = {}
        if self.reference is not None:
            ref = np.zeros((rows, width), np.float32)
            ref[which, cols] = self.reference[doc, 0]
            ref[which, sides] = self.reference[doc, 1]
            extra["ref_logps"] = ref[:, :-1]  # a side's first token is an input, not only a target
        return np.concatenate([which, which]), np.concatenate([cols, sides]), extra


def _few_segments(
    rows: int, width: int, which: list[int], cols: list[int]
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`segments_from_starts` for rows with few segment starts (``cols`` of rows
    ``which``, in order along each row), without a pass over every token per start."""
    ramp = np.arange(width, dtype=np.int32)
    segment_ids = np.ones((rows, width), np.int32)
    positions = np.tile(ramp, (rows, 1))
    for r, c in zip(which, cols, strict=True):
        segment_ids[r, c:] += 1
        positions[r, c:] = ramp[: width - c]
    return segment_ids, positions


@dataclasses.dataclass(frozen=True)
class RowLayout:
    """How a split is cut into rows of ``seq_len + 1`` tokens.

    Attributes:
        rows: rows in the layout (training: whole rows only; evaluation: every token).
        truncated: documents cut to one row (packed examples longer than a row).
        skipped: preference pairs longer than a row, left out (document indices).
    """

    split: TokenSplit
    seq_len: int
    rows: int
    begins: np.ndarray | None  # packed: each row's first token; None: windows
    lengths: np.ndarray | None
    truncated: int = 0
    skipped: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0, np.int64))

    def documents(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(first, count)`` int64 of each row's documents (of a packed layout): the row holds
        documents ``first … first + count - 1``, whole."""
        begin, length = self.spans(rows)
        first = np.searchsorted(self.split.starts, begin, side="left")
        return first, np.searchsorted(self.split.starts, begin + length, side="left") - first

    def spans(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(begin, length)`` int64 of each row."""
        rows = np.asarray(rows, np.int64)
        if self.begins is not None and self.lengths is not None:
            return self.begins[rows], self.lengths[rows]
        begin = rows * self.seq_len
        return begin, np.minimum(self.seq_len + 1, self.split.num_tokens - begin)

    def read(self, rows: np.ndarray, pad_id: int) -> Batch:
        """The batch of ``rows`` (int ``[B]``)."""
        begin, length = self.spans(rows)
        return self.split.read(begin, length, self.seq_len + 1, pad_id)


def layout(split: TokenSplit, seq_len: int, *, whole: bool) -> RowLayout:
    """Rows of ``seq_len + 1`` tokens over ``split``: windows for plain text, whole documents
    packed for examples. ``whole``: cover every token (evaluation; the last row padded)
    instead of whole rows only (training)."""
    if seq_len < 1:
        raise ValueError(f"`seq_len` must be at least 1, got {seq_len}.")
    width = seq_len + 1
    if not split.examples:
        full = max(split.num_tokens - 1, 0) // seq_len
        rows = -(-max(split.num_tokens - 1, 0) // seq_len) if whole else full
        return RowLayout(split, seq_len, rows, None, None)
    # Next fit, in order: a document joins the current row if it fits, else starts the next.
    ends = np.append(split.starts[1:], split.num_tokens)
    sizes = (ends - split.starts).tolist()
    begins: list[int] = []
    lengths: list[int] = []
    truncated = 0
    pairs = split.pair_info is not None
    if pairs and split.pairs != split.num_documents:
        raise ValueError(
            f"The token store {str(split.root)!r} holds {split.pairs:,} preference pairs and "
            f"{split.num_documents - split.pairs:,} other documents; prepare pairs in a store "
            "of their own."
        )
    skipped: list[int] = []
    row_begin, row_len = 0, 0
    for doc, (start, size) in enumerate(zip(split.starts.tolist(), sizes, strict=True)):
        if pairs and size > width:  # never cut: a pair's sides share a row, whole
            skipped.append(doc)
            if row_len:  # rows are spans of the stream: the row ends before the pair
                begins.append(row_begin)
                lengths.append(row_len)
                row_len = 0
            continue
        if size > width:
            size, truncated = width, truncated + 1
        if row_len + size > width:
            begins.append(row_begin)
            lengths.append(row_len)
            row_len = 0
        if row_len == 0:
            row_begin = start
        row_len += size
    if row_len:
        begins.append(row_begin)
        lengths.append(row_len)
    return RowLayout(
        split,
        seq_len,
        len(begins),
        np.array(begins, np.int64),
        np.array(lengths, np.int64),
        truncated,
        np.array(skipped, np.int64),
    )


class TokenStore:
    """A token store opened for reading (see :func:`~zoo_data.prepare_store`).

    Opening checks that every shard file has the size the manifest records (a truncated or
    missing shard is named); :meth:`verify` also checks every checksum (a full read). A store
    with block hashes has each block checked the first time it is read.

    Args:
        path: the store directory.
        tokenizer: the tokenizer a run expects; a store made with another is refused.
        verify: check every shard's sha256 now (reads the whole store).
        check_blocks: check each block against its hash when first read (a store without
            block hashes is read unchecked either way).

    Raises:
        ValueError: not a store, a damaged store, or another tokenizer than ``tokenizer``;
            reading a block that does not match its hash raises
            :class:`~zoo_data.store.DamagedStoreError` (a ``ValueError``).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        tokenizer: Tokenizer | None = None,
        verify: bool = False,
        check_blocks: bool = True,
    ) -> None:
        self.path = pathlib.Path(path)
        self.check_blocks = check_blocks
        self.manifest = check_store(self.path, checksums=verify)
        self.fingerprint: str = self.manifest["fingerprint"]
        self.dtype = np.dtype(self.manifest["dtype"])
        identity = self.manifest["tokenizer"]
        if tokenizer is not None:
            expected = tokenizer_identity(tokenizer, repr(tokenizer))
            if expected["fingerprint"] != identity["fingerprint"]:
                raise ValueError(
                    f"The token store {str(self.path)!r} was made with {identity['description']} "
                    f"(fingerprint {identity['fingerprint'][:12]}), not the run's "
                    f"{expected['description']} (fingerprint {expected['fingerprint'][:12]}); "
                    "name the store's tokenizer with --tokenizer (zoo train without one uses "
                    "the copy the store holds), or prepare the data with the run's tokenizer."
                )
        eos = identity["eos_id"]
        self.pad_id = int(eos) if eos is not None else 0
        self._splits: dict[str, TokenSplit] = {}

    def split(self, name: str = "train") -> TokenSplit:
        """The ``train`` or ``eval`` split."""
        if name not in self._splits:
            shards = [s for s in self.manifest["shards"] if s["split"] == name]
            key = f"{self.fingerprint[:16]}-{name}"
            blocks = block_info(self.manifest) if self.check_blocks else None
            self._splits[name] = TokenSplit(self.path, shards, self.dtype, key, blocks)
        return self._splits[name]

    def close(self) -> None:
        """Close the shard files of the splits read so far (a store on a disk being unmounted
        must hold none open)."""
        for split in self._splits.values():
            split.close()
        self._splits.clear()

    def tokenizer(self) -> Tokenizer:
        """The tokenizer the store was made with."""
        return stored_tokenizer(self.manifest["tokenizer"], self.path / TOKENIZER_DIR)

    def verify(self) -> None:
        """Check every shard's size and sha256.

        Raises:
            ValueError: naming the first truncated, missing or modified file.
        """
        check_store(self.path, checksums=True)

    def __repr__(self) -> str:
        return f"TokenStore({str(self.path)!r}, fingerprint={self.fingerprint[:12]})"
