"""``OptimizerConfig``: the optimizer and its learning-rate schedule, declared once as settings
(the library's config and the command line's ``[optimizer]`` table alike). No JAX here."""

from __future__ import annotations

import dataclasses
import math
from typing import Literal

from ._fields import check, setting

#: The fewest warm-up steps a run resolves from its warm-up fraction.
WARMUP_FLOOR = 10
#: The warm-up fraction of ``zoo train`` (the command's ``optimizer.warmup_fraction``).
WARMUP_FRACTION = 0.125


def default_warmup(steps: int, fraction: float) -> int:
    """Warm-up steps for a run of ``steps``: ``fraction`` of it, at least ``WARMUP_FLOOR`` steps
    and at most half the run, so that even a short run decays its learning rate."""
    if not 0.0 <= fraction <= 1.0:
        raise ValueError(f"`optimizer.warmup_fraction` must be in [0, 1], got {fraction}.")
    return min(max(math.ceil(fraction * steps), WARMUP_FLOOR), steps // 2)


@dataclasses.dataclass(frozen=True)
class OptimizerConfig:
    """The optimizer and its learning-rate schedule: linear warm-up from 0 to ``lr`` over
    ``warmup_steps``, then ``schedule`` to ``lr * min_lr_ratio`` at the last step.

    ``warmup_steps=None`` (the command line's default) takes a fraction of the run (the
    command's ``optimizer.warmup_fraction``; :meth:`warmup`).
    """

    name: Literal["adamw", "sgd", "adafactor"] = setting(
        "adamw", "adamw, sgd (with momentum) or adafactor"
    )
    schedule: Literal["cosine", "linear", "constant"] = setting(
        "cosine",
        "after warm-up: cosine or linear decay to lr * min_lr_ratio at the last step, or constant",
    )
    min_lr_ratio: float = setting(0.1, "final lr as a fraction of lr", within="[0, 1]")
    weight_decay: float = setting(
        0.1,
        "decoupled weight decay (AdamW, Adafactor; added to the gradient for SGD)",
        within="[0, inf)",
    )
    decay_mask: Literal["default", "all", "none"] = setting(
        "default",
        "which parameters decay: default (arrays of 2 or more dims whose path names no "
        "embedding), all or none",
        later=True,
    )
    b1: float = setting(0.9, "Adam b1", within="[0, 1)")
    b2: float = setting(0.95, "Adam b2", within="[0, 1)")
    eps: float = setting(1e-8, "Adam epsilon", within="(0, inf)")
    momentum: float = setting(0.9, "SGD momentum (0: plain SGD)", within="[0, 1)")
    clip_norm: float | None = setting(1.0, "global-norm clipping (none: off)", within="(0, inf)")
    lr: float = setting(
        2e-3, "peak learning rate", top=True, flag="--lr", metavar="LR", within="(0, inf)"
    )
    warmup_steps: int | None = setting(
        0,
        "linear warm-up steps from 0 to lr (none: warmup_fraction of the run)",
        within="[0, inf)",
        identity="schedule",  # a longer run moves the warm-up it takes from its length
    )

    def __post_init__(self) -> None:
        check(self, "optimizer.")

    def warmup(self, steps: int) -> int:
        """The warm-up of a run of ``steps`` steps: ``warmup_steps``, or when it is ``None``
        :data:`WARMUP_FRACTION` of the run (at least 10 steps, at most half the run)."""
        if self.warmup_steps is None:
            return default_warmup(steps, WARMUP_FRACTION)
        return self.warmup_steps
