"""Run configuration: ``OptimizerConfig`` and ``TrainConfig`` (each setting declared once, in
:mod:`zoo_train.settings`, where the command line reads them too), and what a resumed run may
change."""

from __future__ import annotations

from .settings import OptimizerConfig as OptimizerConfig
from .settings import TrainConfig as TrainConfig

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
