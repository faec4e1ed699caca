"""``TrainState``: everything a step changes, as one pytree of arrays (plus static parts)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import optax
from jaxtyping import Array, Int, PyTree, UInt32

from zoo_layers import trainable_mask


class TrainState(eqx.Module):
    """The training state.

    Attributes:
        params: the trainable part of the model (``eqx.partition`` by the trainable filter).
        frozen: the rest of the model (frozen arrays and static parts).
        opt_state: the optimizer state of ``params``.
        step: optimizer steps taken (skipped non-finite steps included).
        skipped: steps whose update was dropped because the loss or gradient was not finite.
        key: raw RNG key data (``jax.random.key_data``) for the next step.
    """

    params: PyTree
    frozen: PyTree
    opt_state: PyTree
    step: Int[Array, ""]
    skipped: Int[Array, ""]
    key: UInt32[Array, " *key"]

    @property
    def model(self) -> PyTree:
        """The full model (``eqx.combine(params, frozen)``)."""
        return eqx.combine(self.params, self.frozen)


def init_train_state(
    model: PyTree,
    optimizer: optax.GradientTransformation,
    *,
    seed: int = 0,
    trainable: Callable[[Any], bool] | PyTree[bool] | None = None,
) -> TrainState:
    """A fresh state for ``model``.

    Args:
        model: an Equinox model (any pytree).
        optimizer: the optax transformation.
        seed: seeds the RNG key handed to the loss function.
        trainable: an ``eqx.partition`` filter (function or pytree of bools) selecting the
            trainable arrays; default every floating-point array but those a layer updates
            otherwise (:func:`zoo_layers.trainable_mask`: a sigmoid router's correction bias).

    The state holds copies of the model's arrays, so ``model`` stays valid after steps donate
    the state.
    """
    spec = trainable_mask(model) if trainable is None else trainable
    # Own copies: the train step donates the state, and the caller's model must stay usable.
    model = jax.tree.map(lambda x: jnp.copy(x) if eqx.is_array(x) else x, model)
    params, frozen = eqx.partition(model, spec)
    return TrainState(
        params=params,
        frozen=frozen,
        opt_state=optimizer.init(params),
        step=jnp.zeros((), jnp.int32),
        skipped=jnp.zeros((), jnp.int32),
        key=jax.random.key_data(jax.random.key(seed)),
    )


def is_inexact_array_like(x: Any) -> bool:
    """A floating-point array, concrete or abstract (``jax.ShapeDtypeStruct``)."""
    if isinstance(x, jax.ShapeDtypeStruct):
        return bool(jnp.issubdtype(x.dtype, jnp.inexact))
    return eqx.is_inexact_array(x)


def trainable_params(
    model: PyTree, trainable: Callable[[Any], bool] | PyTree[bool] | None
) -> PyTree:
    """The trainable part of ``model`` (concrete or abstract) under ``trainable`` (see
    :func:`init_train_state`)."""
    return eqx.filter(model, trainable_mask(model) if trainable is None else trainable)
