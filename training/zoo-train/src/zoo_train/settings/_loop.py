"""``TrainConfig``: the run config of the training loop, declared once as settings.

Each field carries its default, help, range, whether it is part of the run's identity, and
(where it has one) its flag and config-file key; the library's configs are checked against them
when built, and the command line's settings extend this class (:mod:`._run_settings`) and read
and check their values by them (:mod:`._fields`). The defaults are those of ``zoo train`` with
no arguments. No JAX here: ``zoo --help`` and a config file are read without it.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any, Literal

from ._fields import check, declared_identity, parse_window, section, setting, table
from ._mesh_config import MeshConfig
from ._optimizer import OptimizerConfig

#: Seeds index numpy's generators and JAX's keys: non-negative, below 2**32.
SEEDS = "[0, 4294967296)"

#: The most steps a run may take: the optimizer's step counter and the schedule count in int32.
MAX_STEPS = 2**31 - 1

_LATER_DEFAULTS: dict[str, Any] = {"router_aux_loss": None, "router_z_loss": 0.0}


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """One training run: the loop's settings, the optimizer, the mesh and a profile window.

    ``steps`` ends the schedule; a step takes ``grad_accum`` micro-batches of ``batch_size``
    rows (the gradient is the token-weighted mean over all); ``batch_size`` is the global row
    count on a mesh (``mesh``: default every device on the fully sharded data-parallel axis);
    ``sharding`` changes the sharding rules (logical axis name → mesh axes; see
    :data:`zoo_train.parallel.DEFAULT_RULES`). An ``on_nonfinite="stop"`` run raises
    :class:`~zoo_train.NonFiniteLossError`. ``profile``: ``(start, end)`` (or the text
    ``"START:END"``), capture a ``jax.profiler`` trace of steps ``start..end`` (inclusive) into
    ``OUT/profile/`` (read it with ``zoo profile``); ``None``: none.

    Every field declares whether it is part of the run's identity (see
    :func:`~zoo_train.settings.declared_identity`): how a run is logged, evaluated, saved,
    shown and laid out is not, and may change when it resumes.
    """

    steps: int = setting(
        800,
        "optimizer steps",
        flag="--steps",
        metavar="N",
        within=f"[1, {MAX_STEPS}]",
        identity="schedule",
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
        10,
        "steps between metric records",
        flag="--log-every",
        metavar="N",
        within="[1, inf)",
        identity=False,
    )
    eval_every: int = setting(
        100,
        "steps between evaluations (0: only at the end)",
        flag="--eval-every",
        metavar="N",
        within="[0, inf)",
        identity=False,
    )
    eval_batches: int | None = setting(
        8, "cap on evaluation batches (none: the whole split)", within="[1, inf)", identity=False
    )
    checkpoint_every: int = setting(
        100,
        "steps between checkpoints (the last step is always saved)",
        key="save_every",
        flag="--save-every",
        metavar="N",
        within="[1, inf)",
        identity=False,
    )
    keep: int = setting(3, "checkpoints kept besides the best", within="[1, inf)", identity=False)
    async_checkpointing: bool = setting(
        True, "write checkpoints in the background", later=True, identity=False
    )
    progress: bool = setting(
        True,
        "show the progress bar",
        flag="--no-progress",
        switch=False,
        flag_help="no progress bar",
        identity=False,
    )
    plot: bool = setting(True, "write loss_curve.png at the end", later=True, identity=False)
    mesh: MeshConfig = section(MeshConfig, identity=False)  # where it runs, not what
    sharding: dict[str, Any] = table(
        "logical axis name -> mesh axes, changing zoo-train's sharding rules", identity=False
    )
    optimizer: OptimizerConfig = section(OptimizerConfig)
    profile: tuple[int, int] | None = setting(
        None,
        "trace steps START:END into OUT/profile (read: `zoo profile OUT`)",
        flag="--profile",
        metavar="START:END",
        identity=False,
    )

    def __post_init__(self) -> None:
        check(self)
        if self.profile is not None:
            object.__setattr__(self, "profile", parse_window(self.profile))

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (nested optimizer included); fields added later are left out while
        they hold their defaults, so runs recorded before them resume as the same run."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(TrainConfig):  # a subclass's own fields are not the loop's
            value = getattr(self, f.name)
            nested = dataclasses.is_dataclass(value) and not isinstance(value, type)
            out[f.name] = dataclasses.asdict(value) if nested else copy.deepcopy(value)
        for name, default in _LATER_DEFAULTS.items():
            if out[name] == default:
                del out[name]
        if out["mesh"].get("context") == 1:  # the axis came after runs that lack it
            del out["mesh"]["context"]
        return out

    def identity(self) -> dict[str, Any]:
        """What makes the run what it is (:meth:`to_dict` without the settings that are not
        part of its identity): a resumed run must have the same, but for its schedule."""
        own = self.to_dict()
        return {k: v for k, v in own.items() if declared_identity(TrainConfig, (k,)) is not False}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainConfig:
        """Inverse of :meth:`to_dict`."""
        data = dict(data)
        data["optimizer"] = OptimizerConfig(**data.get("optimizer", {}))
        data["mesh"] = MeshConfig.from_dict(data.get("mesh") or {})
        return cls(**data)
