"""``StoreLoader``: training batches from one or more token stores, a pure function of the
global row index, so resuming needs only the step and any number of processes agree."""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from .._packing import Batch
from .._tokenizer import Tokenizer
from ._mixture import Mixture
from ._order import permute
from ._reader import RowLayout, TokenStore, layout

_BLOCK = 256  # positions of an epoch's permutation computed at a time (16 batches of 16)


class HeldOut:
    """Evaluation rows of one store: every row of ``splits`` once, in order (default its
    held-out split; ``("train", "eval")``: every document, for a store of held-out data)."""

    def __init__(
        self, store: TokenStore, seq_len: int, *, splits: Sequence[str] = ("eval",)
    ) -> None:
        self.store = store
        self.layouts = [layout(store.split(name), seq_len, whole=True) for name in splits]
        self.layouts = [lay for lay in self.layouts if lay.rows]

    def close(self) -> None:
        """Close the store's files."""
        self.store.close()

    @property
    def rows(self) -> int:
        """Rows of ``seq_len + 1`` tokens it evaluates."""
        return sum(lay.rows for lay in self.layouts)

    def eval_batches(self, n: int, *, max_batches: int | None = None) -> Iterator[Batch]:
        """Batches of ``n`` rows ``[n, seq_len]``; the last padded with rows of no loss."""
        count = -(-self.rows // n)
        if max_batches is not None:
            count = min(count, max_batches)
        bounds = np.cumsum([0, *(lay.rows for lay in self.layouts)])
        for b in range(count):
            wanted = np.arange(b * n, min((b + 1) * n, self.rows))
            parts = []
            for k, lay in enumerate(self.layouts):
                mine = wanted[(wanted >= bounds[k]) & (wanted < bounds[k + 1])] - bounds[k]
                if len(mine):
                    parts.append(lay.read(mine, self.store.pad_id))
            batch = {key: np.concatenate([p[key] for p in parts]) for key in parts[0]}
            if len(wanted) < n:
                batch = _padded(batch, n, self.store.pad_id)
            yield batch


def _padded(batch: Batch, n: int, pad_id: int) -> Batch:
    out = {}
    for key, value in batch.items():
        fill = pad_id if key in ("input_ids", "targets") else 0
        extra = np.full((n - len(value), *value.shape[1:]), fill, value.dtype)
        out[key] = np.concatenate([value, extra])
    return out


class StoreLoader:
    """Training rows from token stores: each epoch of each store a seeded permutation of its
    rows (computed per row, :func:`permute`), stores mixed by ``weights`` (:class:`Mixture`).

    Global row ``g`` (of the stream of all rows, ``n`` per step) is a pure function of
    ``(seed, g)``: :meth:`batch` ``(step, n)`` gives step ``step``'s rows with no state; with
    ``rows=(start, stop)`` only those rows of it (one process's part of a global batch), so
    each process reads only what it feeds. :meth:`next_batch` and :meth:`state_dict` (the row
    position) are the :class:`~zoo_data.DataSource` protocol over the same rows.

    Batches are the loop's format (:func:`~zoo_data.rows_to_batch`): ``input_ids``,
    ``targets``, ``positions``, ``segment_ids`` (int32 ``[B, seq_len]``) and ``loss_mask``
    (float32 ``[B, seq_len]``).

    Args:
        stores: store paths or opened :class:`TokenStore` s.
        seq_len: ``T``, the model's input length.
        weights: each store's share of the rows (default equal).
        seed: the order's seed.
        shuffle: permute rows each epoch (else serve them in order).
        tokenizer: the run's tokenizer; a store made with another is refused.
        names: the stores' names in metrics (default the directories' names).

    Raises:
        ValueError: stores of different tokenizers, a store with less than one row of
            ``seq_len + 1`` tokens, bad weights.
    """

    def __init__(
        self,
        stores: str | os.PathLike[str] | TokenStore | Sequence[str | os.PathLike[str] | TokenStore],
        *,
        seq_len: int,
        weights: Sequence[float] | None = None,
        seed: int = 0,
        shuffle: bool = True,
        tokenizer: Tokenizer | None = None,
        names: Sequence[str] | None = None,
    ) -> None:
        if isinstance(stores, str | os.PathLike | TokenStore):
            stores = [stores]
        self.stores = [
            s if isinstance(s, TokenStore) else TokenStore(s, tokenizer=tokenizer) for s in stores
        ]
        first = self.stores[0].manifest["tokenizer"]
        for store in self.stores[1:]:
            other = store.manifest["tokenizer"]
            if other["fingerprint"] != first["fingerprint"]:
                raise ValueError(
                    f"The token stores {str(self.stores[0].path)!r} and {str(store.path)!r} were "
                    f"made with different tokenizers ({first['description']} and "
                    f"{other['description']}); prepare them with the same one."
                )
        if weights is not None and len(weights) != len(self.stores):
            raise ValueError(
                f"Give one weight per store: {len(weights)} weight(s) for {len(self.stores)} "
                "store(s)."
            )
        self.names = list(names) if names is not None else [s.path.name for s in self.stores]
        self.seq_len = int(seq_len)
        self.seed = int(seed)
        self.shuffle = bool(shuffle)
        self.mixture = Mixture(weights or [1.0] * len(self.stores), seed=self.seed)
        self.layouts: list[RowLayout] = []
        for store in self.stores:
            rows = layout(store.split("train"), self.seq_len, whole=False)
            if rows.rows == 0:
                raise _no_row(store, rows, self.seq_len)
            self.layouts.append(rows)
        self.pad_id = self.stores[0].pad_id
        self._row = 0
        self.last_sources = np.zeros(0, np.int64)
        self._blocks: dict[tuple[int, int, int], np.ndarray] = {}

    def close(self) -> None:
        """Close the stores' files."""
        for store in self.stores:
            store.close()

    @property
    def rows_per_epoch(self) -> list[int]:
        """Each store's rows per epoch."""
        return [lay.rows for lay in self.layouts]

    def sources(self, start: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
        """``(store, row)`` int64 ``[stop - start]`` of global rows ``start … stop - 1``: which
        store each comes from and which of its rows."""
        index = np.arange(start, stop, dtype=np.int64)
        if len(self.layouts) == 1:
            return np.zeros_like(index), self._rows_of(0, index)
        source, rank = self.mixture.assign(index)
        row = np.empty_like(rank)
        for k in range(len(self.layouts)):
            mine = source == k
            row[mine] = self._rows_of(k, rank[mine])
        return source, row

    def _rows_of(self, k: int, rank: np.ndarray) -> np.ndarray:
        """The rows store ``k`` serves as its ``rank``-th rows (epoch after epoch)."""
        rows = self.layouts[k].rows
        epoch, at = np.divmod(rank, rows)
        if not self.shuffle:
            return at
        out = np.empty_like(at)
        for i, (e, a) in enumerate(zip(epoch.tolist(), at.tolist(), strict=True)):
            out[i] = self._block(k, e, a // _BLOCK, rows)[a % _BLOCK]
        return out

    def _block(self, k: int, epoch: int, block: int, rows: int) -> np.ndarray:
        """Where the permutation of store ``k``'s epoch sends a block of :data:`_BLOCK`
        consecutive positions: computed once for the batches that read through it (one
        vectorised call instead of one per batch), a few blocks kept."""
        key = (k, epoch, block)
        cached = self._blocks.get(key)
        if cached is None:
            index = np.arange(block * _BLOCK, min((block + 1) * _BLOCK, rows), dtype=np.int64)
            cached = permute(index, rows, seed=self.seed, stream=k, epoch=epoch)
            if len(self._blocks) >= 4 * len(self.layouts):
                self._blocks.pop(next(iter(self._blocks)))
            self._blocks[key] = cached
        return cached

    def source_tokens(self, start: int, stop: int) -> dict[str, int]:
        """Tokens each store gives global rows ``start … stop - 1`` (``seq_len`` a row), by
        name."""
        counts = np.bincount(self.sources(start, stop)[0], minlength=len(self.stores))
        return {name: int(c) * self.seq_len for name, c in zip(self.names, counts, strict=True)}

    def rows(self, start: int, stop: int) -> Batch:
        """The batch of global rows ``start … stop - 1``."""
        source, row = self.sources(start, stop)
        self.last_sources = source
        if len(self.layouts) == 1:
            return self.layouts[0].read(row, self.pad_id)
        parts: dict[str, np.ndarray] = {}
        for k, lay in enumerate(self.layouts):
            mine = np.flatnonzero(source == k)
            if not len(mine):
                continue
            batch = lay.read(row[mine], self.pad_id)
            for key, value in batch.items():
                if key not in parts:
                    parts[key] = np.empty((stop - start, *value.shape[1:]), value.dtype)
                parts[key][mine] = value
        return parts

    def batch(self, step: int, n: int, rows: tuple[int, int] | None = None) -> Batch:
        """Step ``step``'s global batch of ``n`` rows (``rows=(start, stop)``: only those)."""
        start, stop = _check_rows(n, rows)
        return self.rows(step * n + start, step * n + stop)

    def next_batch(self, n: int, rows: tuple[int, int] | None = None) -> Batch:
        """The next ``n`` rows (``rows=(start, stop)``: only those of them; the position
        advances by ``n`` all the same)."""
        start, stop = _check_rows(n, rows)
        batch = self.rows(self._row + start, self._row + stop)
        self._row += n
        return batch

    def state_dict(self) -> dict[str, Any]:
        """The position: ``{"row": global rows served}``."""
        return {"row": self._row}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from a position of :meth:`state_dict`."""
        row = int(state.get("row", -1))
        if row < 0:
            raise ValueError(
                f"Loader position {state!r} is not a token store position; resume with the "
                "data the run started with."
            )
        self._row = row

    def describe(self) -> dict[str, Any]:
        """What identifies this data stream (compared on resume): the stores' fingerprints,
        weights, ``seq_len``, seed and shuffle."""
        return {
            "kind": "store",
            "stores": [s.fingerprint for s in self.stores],
            "weights": self.mixture.weights,
            "seq_len": self.seq_len,
            "seed": self.seed,
            "shuffle": self.shuffle,
        }

    def held_out(self) -> dict[str, HeldOut]:
        """Each store's held-out split by name (stores without one left out)."""
        held = {
            name: HeldOut(store, self.seq_len)
            for name, store in zip(self.names, self.stores, strict=True)
        }
        return {name: part for name, part in held.items() if part.rows}

    def eval_batches(self, n: int, *, max_batches: int | None = None) -> Iterator[Batch]:
        """Every store's held-out rows, store after store (see :meth:`held_out` for each alone).

        Raises:
            ValueError: no store has a held-out split.
        """
        parts = list(self.held_out().values())
        if not parts:
            raise ValueError(
                "The token store(s) hold no held-out documents; prepare with --eval-fraction "
                "above 0 or pass held-out data."
            )
        left = max_batches
        for part in parts:
            for batch in part.eval_batches(n, max_batches=left):
                yield batch
                if left is not None:
                    left -= 1
            if left is not None and left <= 0:
                return


def _check_rows(n: int, rows: tuple[int, int] | None) -> tuple[int, int]:
    if n < 1:
        raise ValueError(f"The batch size must be at least 1, got {n}.")
    start, stop = (0, n) if rows is None else rows
    if not 0 <= start < stop <= n:
        raise ValueError(f"`rows` must be a range within the batch of {n}, got {rows!r}.")
    return start, stop


def _no_row(store: TokenStore, rows: RowLayout, seq_len: int) -> ValueError:
    """Why ``store`` gives no training row: its pairs are all longer than a row (with the
    shortest one's length), or it holds too few tokens."""
    split = rows.split
    if split.pair_info is not None and len(rows.skipped):
        ends = np.append(split.starts[1:], split.num_tokens)
        shortest = int((ends - split.starts)[rows.skipped].min())
        count = len(rows.skipped)
        return ValueError(
            f"None of the {count:,} preference pair{'s' if count != 1 else ''} in the token store "
            f"{str(store.path)!r} fits in a row of seq_len + 1 = {seq_len + 1} tokens (the "
            f"shortest pair takes {shortest:,}); raise `seq_len` to at least {shortest - 1:,}."
        )
    return ValueError(
        f"The token store {str(store.path)!r} holds {split.num_tokens} training tokens, fewer "
        f"than one row of seq_len + 1 = {seq_len + 1}; use more data or a shorter `seq_len`."
    )
