"""The run config of the training loop, declared once as settings: ``OptimizerConfig``,
``TrainConfig``, and ``LoopSettings``, the part the command line's settings share.

Each field carries its default, help, range and (where it has one) flag and config-file key;
the library's configs are checked against them when built, and the command line reads and
checks its values by them (:mod:`._fields`). The defaults are those of ``zoo train`` with no
arguments. No JAX here: ``zoo --help`` and a config file are read without it.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Literal

from ._fields import check, section, setting, table
from ._mesh import MeshConfig

#: Seeds index numpy's generators and JAX's keys: non-negative, below 2**32.
SEEDS = "[0, 4294967296)"

#: The most steps a run may take: the optimizer's step counter and the schedule count in int32.
MAX_STEPS = 2**31 - 1

#: The fewest warm-up steps a run resolves from its warm-up fraction.
WARMUP_FLOOR = 10


def default_warmup(steps: int, fraction: float) -> int:
    """Warm-up steps for a run of ``steps``: ``fraction`` of it, at least ``WARMUP_FLOOR`` steps
    and at most half the run, so that even a short run decays its learning rate."""
    if not 0.0 <= fraction <= 1.0:
        raise ValueError(f"`optimizer.warmup_fraction` must be in [0, 1], got {fraction}.")
    return min(max(math.ceil(fraction * steps), WARMUP_FLOOR), steps // 2)


@dataclasses.dataclass(frozen=True)
class OptimizerChoice:
    """The optimizer and the shape of its schedule: what :class:`OptimizerConfig` and the
    ``[optimizer]`` settings of the command line share (the peak rate and the warm-up they
    hold differently)."""

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

    def __post_init__(self) -> None:
        check(self, "optimizer.")


@dataclasses.dataclass(frozen=True)
class OptimizerConfig(OptimizerChoice):
    """The optimizer and its learning-rate schedule: linear warm-up from 0 to ``lr`` over
    ``warmup_steps``, then ``schedule`` (see :class:`OptimizerChoice` for the other fields)."""

    lr: float = setting(2e-3, "peak learning rate", flag="--lr", metavar="LR", within="(0, inf)")
    warmup_steps: int = setting(0, "linear warm-up steps from 0 to lr", within="[0, inf)")


@dataclasses.dataclass(frozen=True)
class LoopSettings:
    """The settings of the training loop that :class:`TrainConfig` and the command line's
    settings share, each declared here once: its default, its help (shown by ``zoo train
    --help`` and in ``zoo_train.settings.keys(RunSettings())``), its range or choices (checked
    when an instance is built) and its config-file key and flag."""

    steps: int = setting(
        800, "optimizer steps", flag="--steps", metavar="N", within=f"[1, {MAX_STEPS}]"
    )
    batch_size: int = setting(
        16, "rows per micro-batch", flag="--batch-size", metavar="N", within="[1, inf)"
    )
    grad_accum: int = setting(
        1, "micro-batches per step", flag="--grad-accum", metavar="N", within="[1, inf)"
    )
    z_loss: float = setting(0.0, "weight of the z-loss", within="[0, inf)")
    router_aux_loss: float | None = setting(
        None,
        "weight of the MoE load-balancing loss (none: the model's router_aux_loss_coef when its "
        "output_router_logits is on, as transformers trains)",
        within="[0, inf)",
    )
    router_z_loss: float = setting(0.0, "weight of the MoE router z-loss", within="[0, inf)")
    compute_dtype: Literal["auto", "float32", "bfloat16"] = setting(
        "auto",
        "auto, float32 or bfloat16: the dtype of the forward pass (auto: bfloat16 on TPU and "
        "GPU, float32 on CPU); master weights and optimizer state stay float32",
    )
    seed: int = setting(
        0,
        "seed of the model init, data order and split",
        flag="--seed",
        metavar="N",
        within=SEEDS,
    )
    on_nonfinite: Literal["stop", "skip"] = setting(
        "stop",
        "stop (a NaN/inf loss or gradient ends the run, the last good checkpoint kept) or skip "
        "(the update is dropped)",
        later=True,
    )
    log_every: int = setting(
        10, "steps between metric records", flag="--log-every", metavar="N", within="[1, inf)"
    )
    eval_every: int = setting(
        100,
        "steps between evaluations (0: only at the end)",
        flag="--eval-every",
        metavar="N",
        within="[0, inf)",
    )
    eval_batches: int | None = setting(
        8, "cap on evaluation batches (none: the whole split)", within="[1, inf)"
    )
    checkpoint_every: int = setting(
        100,
        "steps between checkpoints (the last step is always saved)",
        key="save_every",
        flag="--save-every",
        metavar="N",
        within="[1, inf)",
    )
    keep: int = setting(3, "checkpoints kept besides the best", within="[1, inf)")
    async_checkpointing: bool = setting(True, "write checkpoints in the background", later=True)
    progress: bool = setting(
        True,
        "show the progress bar",
        flag="--no-progress",
        switch=False,
        flag_help="no progress bar",
    )
    plot: bool = setting(True, "write loss_curve.png at the end", later=True)
    mesh: MeshConfig = section(MeshConfig)
    sharding: dict[str, Any] = table(
        "logical axis name -> mesh axes, changing zoo-train's sharding rules"
    )

    def __post_init__(self) -> None:
        check(self)


_LATER_DEFAULTS: dict[str, Any] = {"router_aux_loss": None, "router_z_loss": 0.0}


@dataclasses.dataclass(frozen=True)
class TrainConfig(LoopSettings):
    """One training run: the loop's settings (:class:`LoopSettings`, each field with its help,
    default and range), the optimizer, and a profile window.

    ``steps`` ends the schedule; a step takes ``grad_accum`` micro-batches of ``batch_size``
    rows (the gradient is the token-weighted mean over all); ``batch_size`` is the global row
    count on a mesh (``mesh``: default every device on the fully sharded data-parallel axis);
    ``sharding`` changes the sharding rules (logical axis name → mesh axes; see
    :data:`zoo_train.parallel.DEFAULT_RULES`). An ``on_nonfinite="stop"`` run raises
    :class:`~zoo_train.NonFiniteLossError`.

    Attributes:
        optimizer: see :class:`OptimizerConfig`.
        profile: ``(start, end)``: capture a ``jax.profiler`` trace of steps ``start..end``
            (inclusive) into ``OUT/profile/`` (read it with ``zoo profile``); ``None``: none.
    """

    optimizer: OptimizerConfig = dataclasses.field(default_factory=OptimizerConfig)
    profile: tuple[int, int] | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.profile is not None:
            start, end = self.profile
            if not 1 <= start <= end:
                raise ValueError(
                    f"`profile` must be (start, end) with 1 <= start <= end, got {self.profile}."
                )
            object.__setattr__(self, "profile", (int(start), int(end)))

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (nested optimizer included); fields added later are left out while
        they hold their defaults, so runs recorded before them resume as the same run."""
        out = dataclasses.asdict(self)
        for name, default in _LATER_DEFAULTS.items():
            if out[name] == default:
                del out[name]
        if out["mesh"].get("context") == 1:  # the axis came after runs that lack it
            del out["mesh"]["context"]
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainConfig:
        """Inverse of :meth:`to_dict`."""
        data = dict(data)
        data["optimizer"] = OptimizerConfig(**data.get("optimizer", {}))
        data["mesh"] = MeshConfig.from_dict(data.get("mesh") or {})
        return cls(**data)
