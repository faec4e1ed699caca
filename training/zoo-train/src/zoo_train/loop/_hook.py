"""What a hook is and sees: the ``Hook`` protocol, ``StepEnd`` (a step that just finished, as
the hooks between steps see it) and ``LoopView`` (what a hook may use of the run in
progress)."""

from __future__ import annotations

import dataclasses
import pathlib
from collections.abc import Callable, Mapping
from typing import Any, Protocol


@dataclasses.dataclass(frozen=True)
class LoopView:
    """What a hook may use of the run in progress.

    Attributes:
        out: the output directory.
        model: the model of the state after the last step taken (its arrays on the mesh; valid
            until the next step, which donates them).
        record: writes a metrics record (``{"step": ..., ...}``) to ``metrics.jsonl`` and the
            trackers (process 0).
        drain: reads every pending step's metrics first, so records stay in step order.
        write: prints a line above the progress bar.
        pause: ``pause(seconds)`` keeps time spent outside training out of the throughput.
        mesh, rules: where the model runs and its sharding rules.
    """

    out: pathlib.Path
    model: Callable[[], Any]
    record: Callable[[dict[str, Any]], None]
    drain: Callable[[], None]
    write: Callable[[str], None]
    pause: Callable[[float], None]
    mesh: Any
    rules: Mapping[str, Any]


@dataclasses.dataclass
class StepEnd:
    """A step that just finished, as the hooks see it.

    Attributes:
        step: its number.
        data_state: the loader's position after its batch (what a checkpoint of it records).
        evaluated: the evaluation at this step, if one ran.
        saved: whether a checkpoint of this step was started.
        view: the run in progress (:class:`LoopView`), for hooks that use its model.
    """

    step: int
    data_state: Any
    evaluated: dict[str, float] | None = None
    saved: bool = False
    view: LoopView | None = None


class Hook(Protocol):
    """What runs between steps (:meth:`zoo_train.Trainer.add_hook`): an object with
    ``after_step(end)``, called with the :class:`StepEnd` after the steps its interval picks,
    and, optionally, ``start(view, step)``, called once before a call's first step with the
    :class:`LoopView` and the step the call starts from (0: the untrained model). A plain
    function ``fn(end)`` serves as a hook too.
    """

    def after_step(self, end: StepEnd) -> None:
        """After a step (its metrics may not be read yet: ``end.view.drain()`` reads them)."""
