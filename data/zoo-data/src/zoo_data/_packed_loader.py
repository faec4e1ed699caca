"""``PackedLoader``: shuffled, packed, resumable batches from tokenized documents."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from ._chat import encode_example
from ._documents import Document
from ._packing import Batch, pack_documents, rows_to_batch
from ._tokenizer import Tokenizer, encode_fast, leading_bos


@runtime_checkable
class DataSource(Protocol):
    """What the training loop needs from its data.

    ``next_batch(n)`` returns a dict of numpy arrays with leading dimension ``n`` (what the loss
    function expects); a source may also take ``rows=(start, stop)`` and return only those rows
    of the ``n`` (the position still advances by ``n``), so that each process of a
    multi-process run reads only its own rows. ``state_dict()`` is a small JSON-ready dict from which
    ``load_state_dict`` resumes exactly; ``describe()`` is a JSON-ready description used to refuse
    resuming a run on different data.
    """

    def next_batch(self, n: int) -> Batch: ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...

    def describe(self) -> dict[str, Any]: ...


def tokenize_documents(docs: Sequence[Document], tokenizer: Tokenizer) -> list[np.ndarray]:
    """Encode each document, with BOS first when the tokenizer's configuration adds it
    (``tokenizer.add_bos``, as generation does) and the tokenizer's EOS (when it has one)
    last. int32 arrays."""
    eos = tokenizer.eos_id
    bos = leading_bos(tokenizer)
    out = []
    for doc in docs:
        ids = encode_fast(tokenizer, doc.text)
        arr = (
            np.frombuffer(ids, dtype=np.uint8).astype(np.int32)
            if isinstance(ids, bytes)
            else np.asarray(ids, dtype=np.int32)
        )
        if bos is not None:
            arr = np.concatenate([np.array([bos], dtype=np.int32), arr])
        if eos is not None:
            arr = np.append(arr, np.int32(eos))
        out.append(arr)
    return out


def tokenize_examples(
    docs: Sequence[Document], tokenizer: Tokenizer
) -> tuple[list[np.ndarray], list[np.ndarray] | None]:
    """Token ids of ``docs`` and, when any is an instruction or chat example, each token's
    loss weight (1 on what the model should say, 0 on the rest; plain documents all 1).

    Plain documents are encoded by :func:`tokenize_documents`, examples by
    :func:`~._chat.encode_example` (with BOS and EOS as for plain text).
    """
    if not any(d.turns for d in docs):
        return tokenize_documents(docs, tokenizer), None
    bos, eos = leading_bos(tokenizer), tokenizer.eos_id
    ids: list[np.ndarray] = []
    weights: list[np.ndarray] = []
    for doc in docs:
        if doc.turns:
            tokens, weight = encode_example(doc.turns, tokenizer, bos=bos, eos=eos)
        else:
            (tokens,) = tokenize_documents([doc], tokenizer)
            weight = np.ones(len(tokens), np.float32)
        ids.append(tokens)
        weights.append(weight)
    return ids, weights


class PackedLoader:
    """Packed rows of ``seq_len`` tokens, reshuffled by document every epoch.

    Epoch ``e`` packs the documents in the order ``np.random.default_rng([seed, e]).permutation``
    (or the given order with ``shuffle=False``) and serves its rows in order; the position is
    ``{"epoch", "row"}``, so resuming needs no replay. Every epoch has the same number of rows.

    Batches are dicts of numpy arrays ``[n, seq_len]``: ``input_ids``, ``targets``,
    ``positions``, ``segment_ids`` (int32) and ``loss_mask`` (float32); see
    :func:`rows_to_batch`. ``weights`` (one float array per document, its tokens' loss
    weights, e.g. from :func:`tokenize_examples`) are packed with the tokens and multiply the
    loss mask. An ``eval_only`` loader (read by :meth:`eval_batches` alone) takes data shorter
    than one row: it is evaluated as one padded row instead of being refused.
    """

    def __init__(
        self,
        token_docs: Sequence[np.ndarray | Sequence[int]],
        *,
        seq_len: int,
        seed: int = 0,
        shuffle: bool = True,
        pad_id: int = 0,
        weights: Sequence[np.ndarray] | None = None,
        eval_only: bool = False,
    ) -> None:
        if seq_len < 1:
            raise ValueError(f"`seq_len` must be at least 1, got {seq_len}.")
        if weights is not None:
            if [len(w) for w in weights] != [len(d) for d in token_docs]:
                raise ValueError("`weights` must hold one weight per token of each document.")
            # Packed as integers like the tokens (each weight is 0 or 1).
            weights = [
                np.asarray(w, np.int32) for w, d in zip(weights, token_docs, strict=True) if len(d)
            ]
        self._weights = weights
        self._docs = [np.asarray(d, dtype=np.int32) for d in token_docs if len(d) > 0]
        if not self._docs:
            raise ValueError("The loader got no non-empty documents; pass at least one.")
        self.seq_len = int(seq_len)
        self.seed = int(seed)
        self.shuffle = bool(shuffle)
        self.pad_id = int(pad_id)
        self.num_tokens = int(sum(len(d) for d in self._docs))
        self.rows_per_epoch = self.num_tokens // (self.seq_len + 1)
        if self.rows_per_epoch == 0 and not eval_only:
            raise self._too_short()
        digest = hashlib.sha256()
        for d in self._docs:
            digest.update(np.int64(len(d)).tobytes())
            digest.update(d.tobytes())
        for w in self._weights or []:
            digest.update(w.tobytes())
        self._digest = digest.hexdigest()[:16]
        self._epoch = 0
        self._row = 0
        self._cache: tuple[int, tuple[np.ndarray, ...]] | None = None

    def _too_short(self) -> ValueError:
        return ValueError(
            f"The data holds {self.num_tokens} tokens, fewer than one row of "
            f"seq_len + 1 = {self.seq_len + 1}; use more data or a shorter `seq_len`."
        )

    @classmethod
    def from_documents(
        cls,
        docs: Sequence[Document],
        tokenizer: Tokenizer,
        *,
        seq_len: int,
        seed: int = 0,
        shuffle: bool = True,
        eval_only: bool = False,
    ) -> PackedLoader:
        """Tokenize ``docs`` (:func:`tokenize_examples`: EOS after each, loss weights for
        instruction and chat examples) and build a loader; pads with EOS (or 0)."""
        pad = tokenizer.eos_id if tokenizer.eos_id is not None else 0
        ids, weights = tokenize_examples(docs, tokenizer)
        return cls(
            ids,
            seq_len=seq_len,
            seed=seed,
            shuffle=shuffle,
            pad_id=pad,
            weights=weights,
            eval_only=eval_only,
        )

    def epoch_order(self, epoch: int) -> np.ndarray:
        """The document order of ``epoch``."""
        if not self.shuffle:
            return np.arange(len(self._docs))
        return np.random.default_rng([self.seed, epoch]).permutation(len(self._docs))

    def _pack(self, order: np.ndarray | None, drop_remainder: bool) -> tuple[np.ndarray, ...]:
        """``(tokens, segment_ids, positions[, weights])`` rows of the documents in ``order``."""
        packed = pack_documents(
            self._docs, self.seq_len, order=order, pad_id=self.pad_id, drop_remainder=drop_remainder
        )
        if self._weights is None:
            return packed
        weights = pack_documents(
            self._weights, self.seq_len, order=order, pad_id=0, drop_remainder=drop_remainder
        )[0]
        return (*packed, weights.astype(np.float32))

    def _rows(self, epoch: int) -> tuple[np.ndarray, ...]:
        if self._cache is None or self._cache[0] != epoch:
            self._cache = (epoch, self._pack(self.epoch_order(epoch), True))
        return self._cache[1]

    def next_batch(self, n: int, rows: tuple[int, int] | None = None) -> Batch:
        """The next ``n`` rows, continuing into the next epoch when this one runs out.

        With ``rows=(start, stop)`` only rows ``start … stop - 1`` of those ``n`` are returned
        (the position advances by ``n`` all the same): a process's own part of a global batch.
        """
        if n < 1:
            raise ValueError(f"The batch size must be at least 1, got {n}.")
        if self.rows_per_epoch == 0:  # an eval_only loader of less than one row
            raise self._too_short()
        start, stop = (0, n) if rows is None else rows
        if not 0 <= start < stop <= n:
            raise ValueError(f"`rows` must be a range within the batch of {n}, got {rows!r}.")
        parts: list[tuple[np.ndarray, ...]] = []
        done = 0  # rows of this batch taken so far
        while done < n:
            packed = self._rows(self._epoch)
            take = min(n - done, self.rows_per_epoch - self._row)
            # The part of [done, done + take) inside [start, stop), in this epoch's rows.
            lo, hi = max(start, done), min(stop, done + take)
            if lo < hi:
                first = self._row + lo - done
                parts.append(tuple(a[first : first + hi - lo] for a in packed))
            self._row += take
            done += take
            if self._row == self.rows_per_epoch:
                self._epoch, self._row = self._epoch + 1, 0
        return rows_to_batch(*(np.concatenate([p[i] for p in parts]) for i in range(len(parts[0]))))

    def eval_batches(self, n: int, *, max_batches: int | None = None) -> Iterator[Batch]:
        """Every document once, in the given order, as batches of ``n`` rows (last one padded).

        Padding rows have an all-zero ``loss_mask``, so every batch has the same shape.
        """
        packed = self._pack(None, False)
        count = -(-len(packed[0]) // n)
        if max_batches is not None:
            count = min(count, max_batches)
        for b in range(count):
            rows = [a[b * n : (b + 1) * n] for a in packed]
            extra = n - len(rows[0])
            if extra:  # padding rows: pad tokens, segment 0 (no loss), zero weights
                fills = [self.pad_id, 0, 0, 0][: len(rows)]
                rows = [
                    np.concatenate([r, np.full((extra, r.shape[1]), f, r.dtype)])
                    for r, f in zip(rows, fills, strict=True)
                ]
            yield rows_to_batch(*rows)

    def state_dict(self) -> dict[str, Any]:
        """The position: ``{"epoch": int, "row": int}``."""
        return {"epoch": self._epoch, "row": self._row}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from a position returned by :meth:`state_dict`."""
        epoch, row = int(state["epoch"]), int(state["row"])
        if epoch < 0 or not 0 <= row < self.rows_per_epoch:
            raise ValueError(
                f"Loader position {state!r} is outside this data ({self.rows_per_epoch} rows per "
                "epoch); resume with the data the run started with."
            )
        self._epoch, self._row = epoch, row

    def describe(self) -> dict[str, Any]:
        """What identifies this data stream (compared on resume)."""
        return {
            "kind": "packed",
            "seq_len": self.seq_len,
            "seed": self.seed,
            "shuffle": self.shuffle,
            "pad_id": self.pad_id,
            "num_documents": len(self._docs),
            "num_tokens": self.num_tokens,
            "sha256": self._digest,
            # Only where there are weights: plain data keeps the identity it always had.
            **({"weighted": True} if self._weights is not None else {}),
        }
