"""How long a run is in passes over its training data: ``--epochs N`` as steps, the passes a
run makes, and a warning when they are many (a small data set learnt by heart)."""

from __future__ import annotations

import dataclasses
import math
from typing import Any, TypeVar

from .._usage import UsageError
from ..loop import epochs_text, rows_per_epoch
from ..settings import MAX_STEPS, RunSettings

_S = TypeVar("_S", bound=RunSettings)

#: More passes than this over the training data draw a warning.
MANY_EPOCHS = 4.0


def steps_for_epochs(s: _S, train: Any) -> _S:
    """``s`` with ``steps`` set from ``epochs`` (when given): the steps whose rows cover the
    training data ``epochs`` times, rounded up."""
    if s.epochs is None:
        return s
    if s.epochs <= 0:
        raise UsageError(f"--epochs must be positive, got {s.epochs:g}.")
    rows = rows_per_epoch(train)
    if rows is None:
        raise UsageError("--epochs needs data whose size is known; pass --steps instead.")
    steps = max(1, math.ceil(s.epochs * rows / (s.batch_size * s.grad_accum)))
    if steps > MAX_STEPS:
        raise UsageError(
            f"--epochs {s.epochs:g} makes {steps:,} steps, more than a run may take "
            f"({MAX_STEPS:,}); lower --epochs."
        )
    return dataclasses.replace(s, steps=steps)


def epochs(s: RunSettings, train: Any) -> float | None:
    """The passes ``s.steps`` steps make over the training data (``None``: size unknown)."""
    rows = rows_per_epoch(train)
    return None if rows is None else s.steps * s.batch_size * s.grad_accum / rows


def epochs_phrase(s: RunSettings, train: Any) -> str:
    """``" (0.55 epochs)"`` for the start line ("" when the size is unknown)."""
    passes = epochs(s, train)
    if passes is None:
        return ""
    return f" ({epochs_text(passes)} epoch{'' if passes == 1 else 's'})"


def many_epochs_warning(s: RunSettings, train: Any) -> str | None:
    """The warning for a run of more than :data:`MANY_EPOCHS` passes, or ``None``."""
    passes = epochs(s, train)
    if passes is None or passes <= MANY_EPOCHS:
        return None
    rows = rows_per_epoch(train)
    return (
        f"zoo: warning: {s.steps} steps of {s.batch_size * s.grad_accum} rows pass over the "
        f"training data ({rows:,} rows of {s.seq_len} tokens) {epochs_text(passes)} times, so "
        "the model may learn it by heart; pass --epochs N (e.g. 3) instead of --steps, or add "
        "data."
    )
