"""The plan of a run's state on a mesh: its optimizer, and its abstract, sharded layout.

Training, loading a run and ``zoo compile`` all need the same three things before any array
exists: the optimizer for the model's trainable part, the ``TrainState`` as
``ShapeDtypeStruct``s, and where each of its arrays lives on the mesh.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

import equinox as eqx
import optax
from jax.sharding import Mesh
from jaxtyping import PyTree

from ._optim import make_optimizer
from ._state import TrainState, init_train_state, trainable_params
from .parallel import state_shardings, with_shardings
from .settings import TrainConfig


def is_builder(model: Any) -> bool:
    """Whether ``model`` is a zero-argument function that builds the model (not a model)."""
    return callable(model) and not isinstance(model, eqx.Module)


@dataclasses.dataclass(frozen=True)
class StatePlan:
    """A run's state before it exists.

    Attributes:
        optimizer, schedule: from ``make_optimizer`` for the model's trainable arrays.
        abstract_model: the model as ``ShapeDtypeStruct``s (or the model itself, when given).
        template: the ``TrainState`` as ``ShapeDtypeStruct``s carrying ``shardings`` (what a
            checkpoint restores into, or a step is lowered with).
        shardings: the state's shardings (``parallel.state_shardings``).
        fresh: ``fresh(model) -> TrainState``, a new state for a model.
    """

    optimizer: optax.GradientTransformation
    schedule: optax.Schedule
    abstract_model: PyTree
    template: TrainState
    shardings: PyTree
    fresh: Callable[[PyTree], TrainState]


def plan_state(
    model: PyTree | Callable[[], PyTree],
    config: TrainConfig,
    mesh: Mesh,
    rules: Mapping[str, Any],
    *,
    trainable: Any = None,
    abstract_model: PyTree | None = None,
) -> StatePlan:
    """Plan the state of a run of ``model`` (a model, or a zero-argument builder) under
    ``config`` on ``mesh``; nothing is allocated. ``abstract_model`` saves tracing the builder
    again when the caller already has it."""
    build = model if is_builder(model) else (lambda: model)
    if abstract_model is None:
        abstract_model = eqx.filter_eval_shape(build) if is_builder(model) else model
    optimizer, schedule = make_optimizer(
        config.optimizer, config.steps, trainable_params(abstract_model, trainable)
    )

    def fresh(m: PyTree) -> TrainState:
        return init_train_state(m, optimizer, seed=config.seed, trainable=trainable)

    abstract = eqx.filter_eval_shape(lambda: fresh(build()))
    shardings = state_shardings(abstract, optimizer, mesh, rules)
    return StatePlan(
        optimizer=optimizer,
        schedule=schedule,
        abstract_model=abstract_model,
        template=with_shardings(abstract, shardings),
        shardings=shardings,
        fresh=fresh,
    )
