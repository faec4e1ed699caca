"""What the loop is given to evaluate on, and what a call to ``train`` ends with."""

from __future__ import annotations

import dataclasses
import pathlib
from collections.abc import Iterator
from typing import Any, Protocol

from jaxtyping import PyTree

from zoo_data import Batch

from .._state import TrainState


class EvalSource(Protocol):
    """Held-out data: ``eval_batches(n, max_batches=None)`` yields fixed-shape batches."""

    def eval_batches(self, n: int, *, max_batches: int | None = None) -> Iterator[Batch]: ...


@dataclasses.dataclass
class TrainResult:
    """What a call to :func:`train` ended with.

    Attributes:
        state: the final ``TrainState`` (``state.model`` is the trained model).
        step: the last step taken.
        start_step: the step this call started from (0, or the resumed checkpoint's step).
        resumed_from: the checkpoint step resumed from, or ``None`` for a fresh start.
        skipped_checkpoints: reports of unreadable checkpoints passed over on resume.
        last_eval: the last evaluation record, if any.
        out: the output directory.
        checkpoint_steps: committed checkpoint steps at the end.
        best_step: the committed step with the lowest eval loss, if any.
    """

    state: TrainState
    step: int
    start_step: int
    resumed_from: int | None
    skipped_checkpoints: list[str]
    last_eval: dict[str, Any] | None
    out: pathlib.Path
    checkpoint_steps: list[int]
    best_step: int | None

    @property
    def model(self) -> PyTree:
        """The trained model."""
        return self.state.model
