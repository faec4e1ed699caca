"""The jitted train and evaluation steps."""

from __future__ import annotations

from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import optax
from jaxtyping import PyTree

from ._compiler import step_compiler_options
from ._loss import LossFn
from ._state import TrainState

StepFn = Callable[[dict[str, jax.Array], TrainState], tuple[TrainState, dict[str, jax.Array]]]
EvalFn = Callable[[dict[str, jax.Array], TrainState], dict[str, jax.Array]]


def _sums(loss_fn: LossFn, params: PyTree, frozen: PyTree, batch: dict, key: jax.Array) -> tuple:
    loss_sum, aux = loss_fn(eqx.combine(params, frozen), batch, key)
    if "weight" not in aux:
        raise ValueError("The loss function's aux dict must hold 'weight' (the counted units).")
    return jnp.asarray(loss_sum, jnp.float32), {
        k: jnp.asarray(v, jnp.float32) for k, v in aux.items()
    }


def accumulate_gradients(
    loss_fn: LossFn, params: PyTree, frozen: PyTree, batch: dict, key: jax.Array, grad_accum: int
) -> tuple[jax.Array, dict[str, jax.Array], PyTree]:
    """Summed loss, summed aux and summed gradient over ``grad_accum`` micro-batches.

    ``batch`` leaves have a leading dimension ``grad_accum * micro_batch``; the micro-batches are
    consecutive slices, processed by ``lax.scan`` so only one micro-batch's activations live at
    a time.
    """
    grad_fn = eqx.filter_value_and_grad(
        lambda p, b, k: _sums(loss_fn, p, frozen, b, k), has_aux=True
    )
    if grad_accum == 1:
        (loss_sum, aux), grads = grad_fn(params, batch, key)
        return loss_sum, aux, grads
    micro = jax.tree.map(lambda x: x.reshape(grad_accum, -1, *x.shape[1:]), batch)
    keys = jax.random.split(key, grad_accum)
    zero_grads = jax.tree.map(jnp.zeros_like, params)
    (_, aux_shape), _ = eqx.filter_eval_shape(
        grad_fn, params, jax.tree.map(lambda x: x[0], micro), keys[0]
    )
    zero_aux = {k: jnp.zeros((), jnp.float32) for k in aux_shape}

    def body(carry: tuple, xs: tuple) -> tuple:
        loss_acc, aux_acc, grad_acc = carry
        mb, k = xs
        (loss_sum, aux), grads = grad_fn(params, mb, k)
        grad_acc = jax.tree.map(jnp.add, grad_acc, grads)
        aux_acc = {n: aux_acc[n] + aux[n] for n in aux_acc}
        return (loss_acc + loss_sum, aux_acc, grad_acc), None

    (loss_sum, aux, grads), _ = jax.lax.scan(
        body, (jnp.zeros((), jnp.float32), zero_aux, zero_grads), (micro, keys)
    )
    return loss_sum, aux, grads


def make_train_step(
    optimizer: optax.GradientTransformation,
    loss_fn: LossFn,
    schedule: optax.Schedule,
    *,
    grad_accum: int = 1,
    compiler_options: dict[str, str] | None = None,
) -> StepFn:
    """``step(batch, state) -> (state, metrics)``, jitted, donating the state's buffers.

    The gradient is the sum over micro-batches divided by the total ``weight`` (the token mean of
    the whole step). If the loss or the gradient norm is not finite, the parameters and optimizer
    state are left unchanged (``metrics["finite"]`` is false and ``state.skipped`` counts it);
    the loop decides whether to stop or go on.

    ``metrics``: ``loss``, ``weight``, ``grad_norm`` (before clipping), ``lr`` (of this update),
    ``finite`` and each other ``aux`` entry divided by ``weight``.

    ``compiler_options`` are XLA options for the step; ``None`` uses
    :func:`step_compiler_options` for the default backend, ``{}`` none at all.
    """

    def step(batch: dict[str, jax.Array], state: TrainState) -> tuple[TrainState, dict]:
        key = jax.random.wrap_key_data(state.key)
        next_key, step_key = jax.random.split(key)
        loss_sum, aux, grads = accumulate_gradients(
            loss_fn, state.params, state.frozen, batch, step_key, grad_accum
        )
        weight = jnp.maximum(aux["weight"], 1.0)
        grads = jax.tree.map(lambda g: g / weight, grads)
        loss = loss_sum / weight
        grad_norm = optax.tree.norm(grads)
        finite = jnp.isfinite(loss) & jnp.isfinite(grad_norm)
        updates, new_opt_state = optimizer.update(grads, state.opt_state, state.params)
        new_params = optax.apply_updates(state.params, updates)
        keep = lambda new, old: jax.tree.map(lambda a, b: jnp.where(finite, a, b), new, old)
        new_state = TrainState(
            params=keep(new_params, state.params),
            frozen=state.frozen,
            opt_state=keep(new_opt_state, state.opt_state),
            step=state.step + 1,
            skipped=state.skipped + jnp.where(finite, 0, 1).astype(jnp.int32),
            key=jax.random.key_data(next_key),
        )
        metrics = {
            "loss": loss,
            "weight": aux["weight"],
            "grad_norm": grad_norm,
            "lr": jnp.asarray(schedule(state.step - state.skipped), jnp.float32),
            "finite": finite,
        }
        metrics.update({k: v / weight for k, v in aux.items() if k != "weight"})
        return new_state, metrics

    # Batch first so "all-except-first" donates the state only (batch buffers cannot alias outputs).
    options = step_compiler_options() if compiler_options is None else compiler_options
    return eqx.filter_jit(step, donate="all-except-first", compiler_options=options)


def make_eval_step(loss_fn: LossFn, *, compiler_options: dict[str, str] | None = None) -> EvalFn:
    """``eval_step(batch, state) -> {"loss_sum", **aux sums}`` (jitted, no donation).

    ``compiler_options`` as for :func:`make_train_step`.
    """

    def eval_step(batch: dict[str, jax.Array], state: TrainState) -> dict:
        loss_sum, aux = _sums(loss_fn, state.params, state.frozen, batch, jax.random.key(0))
        return {"loss_sum": loss_sum, **aux}

    options = step_compiler_options() if compiler_options is None else compiler_options
    return eqx.filter_jit(eval_step, compiler_options=options)
