"""Run configuration: ``OptimizerConfig`` and ``TrainConfig``."""

from __future__ import annotations

import dataclasses
from typing import Any, Literal

from .parallel import MeshConfig

OptimizerName = Literal["adamw", "sgd", "adafactor"]
ScheduleName = Literal["cosine", "linear", "constant"]
DecayMask = Literal["default", "all", "none"]


@dataclasses.dataclass(frozen=True)
class OptimizerConfig:
    """The optimizer and its learning-rate schedule.

    Attributes:
        name: ``"adamw"``, ``"sgd"`` (with momentum) or ``"adafactor"``.
        lr: the peak learning rate.
        warmup_steps: linear warm-up from 0 to ``lr``.
        schedule: after warm-up: ``"cosine"`` or ``"linear"`` decay to ``lr * min_lr_ratio`` at
            the last step, or ``"constant"``.
        min_lr_ratio: the final learning rate as a fraction of ``lr``.
        weight_decay: decoupled weight decay (AdamW/Adafactor; added to the gradient for SGD).
        decay_mask: which parameters decay: ``"default"`` (arrays with at least 2 dims whose path
            names no embedding: matrices decay; norms, biases and embeddings do not), ``"all"``
            or ``"none"``.
        b1, b2, eps: Adam moments and epsilon.
        momentum: SGD momentum (0 for plain SGD).
        clip_norm: global-norm gradient clipping threshold; ``None`` disables it.
    """

    name: OptimizerName = "adamw"
    lr: float = 3e-4
    warmup_steps: int = 0
    schedule: ScheduleName = "cosine"
    min_lr_ratio: float = 0.1
    weight_decay: float = 0.1
    decay_mask: DecayMask = "default"
    b1: float = 0.9
    b2: float = 0.95
    eps: float = 1e-8
    momentum: float = 0.9
    clip_norm: float | None = 1.0

    def __post_init__(self) -> None:
        if self.name not in ("adamw", "sgd", "adafactor"):
            raise ValueError(f"optimizer must be 'adamw', 'sgd' or 'adafactor', got {self.name!r}.")
        if self.schedule not in ("cosine", "linear", "constant"):
            raise ValueError(
                f"schedule must be 'cosine', 'linear' or 'constant', got {self.schedule!r}."
            )
        if self.decay_mask not in ("default", "all", "none"):
            raise ValueError(
                f"decay_mask must be 'default', 'all' or 'none', got {self.decay_mask!r}."
            )
        if not self.lr > 0:
            raise ValueError(f"lr must be positive, got {self.lr}.")
        if self.warmup_steps < 0:
            raise ValueError(f"warmup_steps must be >= 0, got {self.warmup_steps}.")
        if not 0.0 <= self.min_lr_ratio <= 1.0:
            raise ValueError(f"min_lr_ratio must be in [0, 1], got {self.min_lr_ratio}.")
        if self.weight_decay < 0:
            raise ValueError(f"weight_decay must be >= 0, got {self.weight_decay}.")
        if self.clip_norm is not None and not self.clip_norm > 0:
            raise ValueError(f"clip_norm must be positive or None, got {self.clip_norm}.")


_LATER_DEFAULTS: dict[str, Any] = {"router_aux_loss": None, "router_z_loss": 0.0}


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """One training run.

    Attributes:
        steps: total optimizer steps (the schedule ends here).
        batch_size: rows per micro-batch.
        grad_accum: micro-batches per optimizer step (the step's batch is
            ``grad_accum * batch_size`` rows; the gradient is the token-weighted mean over all).
        optimizer: see :class:`OptimizerConfig`.
        z_loss: weight of the ``log(Z)²`` auxiliary loss of the default LM loss (0 disables).
        router_aux_loss: weight of the load-balancing loss of mixture-of-experts models in the
            default LM loss (``None``: the model config's ``router_aux_loss``).
        router_z_loss: weight of their router z-loss (0 disables).
        compute_dtype: ``"auto"`` (bfloat16 on TPU/GPU, float32 on CPU), ``"float32"`` or
            ``"bfloat16"``: the dtype the default LM loss casts floating parameters to for the
            forward pass; master weights and optimizer state stay float32.
        seed: seeds the training RNG key passed to the loss function.
        on_nonfinite: ``"stop"``: a NaN/inf loss or gradient stops the run (raising
            :class:`NonFiniteLossError`) with the last good checkpoint kept; ``"skip"``: the
            update is dropped and training goes on.
        log_every: steps between train records in ``metrics.jsonl``.
        eval_every: steps between evaluations (0: only at the end); needs evaluation data.
        eval_batches: cap on evaluation batches (``None``: the whole validation split).
        checkpoint_every: steps between checkpoints (the last step is always saved).
        keep: checkpoints kept besides the best by eval loss.
        async_checkpointing: write checkpoints in the background.
        progress: show a progress bar on stderr.
        plot: write ``loss_curve.png`` at the end.
        mesh: the device mesh (:class:`zoo_train.parallel.MeshConfig`; default every device on
            the fully sharded data-parallel axis). ``batch_size`` is the global row count.
        sharding: changes to the sharding rules (logical axis name → mesh axes; see
            :data:`zoo_train.parallel.DEFAULT_RULES`).
        profile: ``(start, end)``: capture a ``jax.profiler`` trace of steps ``start..end``
            (inclusive) into ``OUT/profile/`` (read it with ``zoo profile``); ``None``: none.
    """

    steps: int = 1000
    batch_size: int = 8
    grad_accum: int = 1
    optimizer: OptimizerConfig = dataclasses.field(default_factory=OptimizerConfig)
    z_loss: float = 0.0
    router_aux_loss: float | None = None
    router_z_loss: float = 0.0
    compute_dtype: Literal["auto", "float32", "bfloat16"] = "auto"
    seed: int = 0
    on_nonfinite: Literal["stop", "skip"] = "stop"
    log_every: int = 10
    eval_every: int = 100
    eval_batches: int | None = None
    checkpoint_every: int = 100
    keep: int = 3
    async_checkpointing: bool = True
    progress: bool = True
    plot: bool = True
    mesh: MeshConfig = dataclasses.field(default_factory=MeshConfig)
    sharding: dict[str, Any] = dataclasses.field(default_factory=dict)
    profile: tuple[int, int] | None = None

    def __post_init__(self) -> None:
        if self.profile is not None:
            start, end = self.profile
            if not 1 <= start <= end:
                raise ValueError(
                    f"`profile` must be (start, end) with 1 <= start <= end, got {self.profile}."
                )
            object.__setattr__(self, "profile", (int(start), int(end)))
        for name in ("steps", "batch_size", "grad_accum", "log_every", "checkpoint_every", "keep"):
            if getattr(self, name) < 1:
                raise ValueError(f"`{name}` must be at least 1, got {getattr(self, name)}.")
        if self.eval_every < 0:
            raise ValueError(f"`eval_every` must be >= 0, got {self.eval_every}.")
        if self.eval_batches is not None and self.eval_batches < 1:
            raise ValueError(f"`eval_batches` must be at least 1 or None, got {self.eval_batches}.")
        if self.z_loss < 0:
            raise ValueError(f"`z_loss` must be >= 0, got {self.z_loss}.")
        if self.router_aux_loss is not None and self.router_aux_loss < 0:
            raise ValueError(f"`router_aux_loss` must be >= 0, got {self.router_aux_loss}.")
        if self.router_z_loss < 0:
            raise ValueError(f"`router_z_loss` must be >= 0, got {self.router_z_loss}.")
        if self.compute_dtype not in ("auto", "float32", "bfloat16"):
            raise ValueError(
                f"`compute_dtype` must be 'auto', 'float32' or 'bfloat16', got {self.compute_dtype!r}."
            )
        if self.on_nonfinite not in ("stop", "skip"):
            raise ValueError(f"`on_nonfinite` must be 'stop' or 'skip', got {self.on_nonfinite!r}.")

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (nested optimizer included); fields added later are left out while
        they hold their defaults, so runs recorded before them resume as the same run."""
        out = dataclasses.asdict(self)
        for name, default in _LATER_DEFAULTS.items():
            if out[name] == default:
                del out[name]
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainConfig:
        """Inverse of :meth:`to_dict`."""
        data = dict(data)
        data["optimizer"] = OptimizerConfig(**data.get("optimizer", {}))
        data["mesh"] = MeshConfig.from_dict(data.get("mesh") or {})
        return cls(**data)


# Fields that may change when a run is resumed: they do not change the training trajectory.
RESUME_SAFE_FIELDS = frozenset(
    {
        "log_every",
        "eval_every",
        "eval_batches",
        "checkpoint_every",
        "keep",
        "async_checkpointing",
        "progress",
        "plot",
        # How the run is laid out on devices, not what it computes.
        "mesh",
        "sharding",
        # What is watched, not what is computed.
        "profile",
    }
)
