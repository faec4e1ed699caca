"""What the loop checks on every host batch before it goes to the devices (token ids within the
model's vocabulary), and what it knows of recent batches when a step's loss is not finite."""

from __future__ import annotations

import collections
import dataclasses
import threading
from collections.abc import Mapping
from typing import Any

import numpy as np

# Steps whose batch facts are kept: a step's metrics are read at most a few steps late
# (StepMetrics' lag plus the prefetch depth), so its batch has long been made by then.
_KEPT = 16


@dataclasses.dataclass(frozen=True)
class BatchFacts:
    """A host batch in a few numbers.

    Attributes:
        step: the step (1-based) the batch trains.
        low, high: its smallest and largest token id (``input_ids`` and ``targets``).
        rows: its rows (this process's).
        empty_rows: rows with no token to train on (every loss weight 0).
    """

    step: int
    low: int
    high: int
    rows: int
    empty_rows: int

    def bad_id(self, vocab_size: int | None) -> int | None:
        """An id outside ``[0, vocab_size)`` (the largest, or a negative one), or ``None``."""
        if self.low < 0:
            return self.low
        if vocab_size is not None and self.high >= vocab_size:
            return self.high
        return None


def batch_facts(step: int, batch: Mapping[str, Any]) -> BatchFacts | None:
    """The :class:`BatchFacts` of a batch of ``input_ids``/``targets`` (``[B, T]``), or
    ``None`` for a batch of other keys."""
    ids = [np.asarray(batch[k]) for k in ("input_ids", "targets") if k in batch]
    if not ids or not all(a.size for a in ids):
        return None
    low = min(int(a.min()) for a in ids)
    high = max(int(a.max()) for a in ids)
    mask = batch.get("loss_mask")
    rows = len(ids[0])
    empty = 0 if mask is None else int((~np.asarray(mask).reshape(rows, -1).any(axis=1)).sum())
    return BatchFacts(step, low, high, rows, empty)


class BatchChecks:
    """Checks each batch as it is made, in order from step ``first_step`` (in the thread that
    makes them), and keeps the facts of the last few for :meth:`facts`.

    Args:
        first_step: the step the first batch checked trains.
        vocab_size: the model's vocabulary (``None``: unknown, only negative ids are refused).
        data: the training data source (its token stores, if it has any, are named in an error).
    """

    def __init__(self, first_step: int, vocab_size: int | None, data: Any) -> None:
        self.next_step = first_step
        self.vocab_size = vocab_size
        self.data = describe_data(data)
        paths = _store_paths(data)
        self.store = paths[0] if len(paths) == 1 else "STORE"  # what to pass to verify
        self._facts: collections.deque[BatchFacts] = collections.deque(maxlen=_KEPT)
        self._lock = threading.Lock()

    def __call__(self, batch: Mapping[str, Any]) -> None:
        """Check the next step's host batch.

        Raises:
            ValueError: a token id outside the model's vocabulary.
        """
        facts = batch_facts(self.next_step, batch)
        self.next_step += 1
        if facts is None:
            return
        with self._lock:
            self._facts.append(facts)
        bad = facts.bad_id(self.vocab_size)
        if bad is not None:
            vocabulary = (
                f"the model's vocabulary of {self.vocab_size:,} ids"
                if self.vocab_size is not None
                else "any vocabulary"
            )
            raise ValueError(
                f"The batch of step {facts.step} from {self.data} holds token id {bad:,}, "
                f"outside {vocabulary}, so the data is damaged or was made with another "
                f"tokenizer; check it with `zoo data verify {self.store}` and prepare it again "
                "with the run's tokenizer (nothing was trained on it)."
            )

    def facts(self, step: int) -> BatchFacts | None:
        """The facts of step ``step``'s batch, if it is still kept."""
        with self._lock:
            return next((f for f in self._facts if f.step == step), None)


def _store_paths(data: Any) -> list[str]:
    """The paths of a data source's token stores (a ``StoreLoader``'s), else none."""
    return [str(s.path) for s in getattr(data, "stores", None) or () if hasattr(s, "path")]


def describe_data(data: Any) -> str:
    """How an error names a data source: its token stores' paths, else ``the training data``."""
    paths = _store_paths(data)
    if not paths:
        return "the training data"
    return f"the token store{'s' if len(paths) > 1 else ''} " + ", ".join(map(repr, paths))


def model_vocab_size(model: Any) -> int | None:
    """The vocabulary size the model's ``config`` declares (a zoo model), else ``None``."""
    size = getattr(getattr(model, "config", None), "vocab_size", None)
    return int(size) if isinstance(size, int) else None


def nonfinite_cause(
    facts: BatchFacts | None, vocab_size: int | None, params_finite: bool | None
) -> tuple[str, str] | None:
    """The first cause found of a step's non-finite loss, as ``(cause, fix)``: token ids
    outside the vocabulary, rows with nothing to train on, parameters already non-finite;
    ``None`` when none of these holds."""
    if facts is not None:
        bad = facts.bad_id(vocab_size)
        if bad is not None:
            return (
                f"its batch holds token id {bad:,}, outside the model's vocabulary"
                + (f" of {vocab_size:,} ids" if vocab_size is not None else ""),
                "check the data with `zoo data verify STORE` and prepare it with the run's "
                "tokenizer",
            )
        if facts.empty_rows:
            return (
                f"{facts.empty_rows} of its batch's {facts.rows} rows have no token to train on "
                "(every loss weight 0)",
                "drop the examples with nothing to train on, or use a longer --seq-len so "
                "their responses fit",
            )
    if params_finite is False:
        return (
            "the parameters were already non-finite before it",
            "resume from an earlier checkpoint or start from finite weights",
        )
    return None
