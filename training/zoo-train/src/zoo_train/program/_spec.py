"""``StepSpec``: everything a run's steps depend on, and nothing about where its data or
output live."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from jax.sharding import Mesh
from jaxtyping import PyTree

from .._config import TrainConfig
from .._loss import LossFn
from ..parallel import make_mesh, make_rules


@dataclasses.dataclass(frozen=True)
class StepSpec:
    """What the train and evaluation steps compute.

    Attributes:
        model: any Equinox model, or a zero-argument function that builds one (the state is
            then planned abstractly and built directly sharded, or never, when resuming or
            compiling ahead of time). With the default loss it is called as
            ``model(input_ids [B,T], *, positions, segment_ids) -> logits [B,T,V]``.
        config: the run's :class:`~zoo_train.TrainConfig`: optimizer and schedule, gradient
            accumulation, loss weights, compute dtype, mesh and sharding rules.
        loss_fn: ``loss_fn(model, batch, key) -> (loss_sum, aux)`` (see :mod:`zoo_train._loss`);
            ``None``: :func:`~zoo_train.make_lm_loss` with the config's weights and dtype.
        trainable: an ``eqx.partition`` filter choosing the trained arrays (``None``: every
            floating-point array); the rest is frozen and holds no optimizer state.
        mesh: the device mesh (``None``: ``make_mesh(config.mesh)`` over every device).
    """

    model: PyTree | Callable[[], PyTree]
    config: TrainConfig
    loss_fn: LossFn | None = None
    trainable: Any = None
    mesh: Mesh | None = None

    def layout(self) -> tuple[Mesh, Any]:
        """``(mesh, rules)``: the spec's mesh (else the config's over every device) and the
        sharding rules with the config's changes."""
        mesh = make_mesh(self.config.mesh) if self.mesh is None else self.mesh
        return mesh, make_rules(self.config.sharding)

    def with_batch_size(self, batch_size: int) -> StepSpec:
        """The same step for a micro-batch of ``batch_size`` rows."""
        config = dataclasses.replace(self.config, batch_size=batch_size)
        return dataclasses.replace(self, config=config)
