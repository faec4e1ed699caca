"""``StepEnd``: a step that just finished, as the hooks between steps see it."""

from __future__ import annotations

import dataclasses
from typing import Any


@dataclasses.dataclass
class StepEnd:
    """A step that just finished, as the hooks see it.

    Attributes:
        step: its number.
        data_state: the loader's position after its batch (what a checkpoint of it records).
        evaluated: the evaluation at this step, if one ran.
        saved: whether a checkpoint of this step was started.
    """

    step: int
    data_state: Any
    evaluated: dict[str, float] | None = None
    saved: bool = False
