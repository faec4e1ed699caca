"""``TrainSpec``: everything one call of the loop is given."""

from __future__ import annotations

import dataclasses
import pathlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from zoo_data import DataSource

from ..program import StepSpec
from ._evaluate import EvalData
from ._hook import StepEnd


@dataclasses.dataclass(frozen=True)
class TrainSpec:
    """A call of the loop: the steps it takes, the data it takes them on, and where it writes.

    Attributes:
        step: what the steps compute (:class:`~zoo_train.program.StepSpec`).
        data: a :class:`~zoo_data.DataSource`; each step draws
            ``grad_accum * batch_size`` rows.
        out: the output directory: ``metrics.jsonl``, ``loss_curve.png``, ``checkpoints/``.
        eval_data: held-out data, evaluated every ``eval_every`` steps and at the end.
        run_info: JSON-ready facts about the run, stored in checkpoints and required to match
            on resume.
        stop_at: end this call after this step (checkpointed).
        on_record: called with every metrics record as it is written.
        start_info: JSON-ready facts for the start (or resume) record, not compared on resume.
        hooks: ``(fn, every)`` pairs run after the standard hooks.
        rollout: ``rollout(model, step, rows) -> batch``: each step's batch made from the
            data's rows with the model being trained, on the host thread before the step
            (GRPO's sampled completions); ``rollout.shapes()`` gives the batch's fields as
            abstract arrays. ``None``: the data's rows are the batch.
    """

    step: StepSpec
    data: DataSource
    out: pathlib.Path
    eval_data: EvalData | None = None
    run_info: Mapping[str, Any] | None = None
    stop_at: int | None = None
    on_record: Callable[[dict[str, Any]], None] | None = None
    start_info: Mapping[str, Any] | None = None
    hooks: Sequence[tuple[Callable[[StepEnd], None], int | None]] = ()
    rollout: Any = None
