"""The jitted train and evaluation steps, on one device or sharded over a mesh."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping

import equinox as eqx
import jax
import jax.numpy as jnp
import optax
from jax.sharding import Mesh
from jaxtyping import PyTree

import zoo_layers

from ._loss import ROUTER_COUNTS, LossFn
from ._state import TrainState
from ._step_metrics import PackedMetrics
from ._xla_options import step_compiler_options
from .parallel import (
    MeshAxes,
    MeshFunction,
    PackedBatch,
    balanced_sequences,
    batch_shardings,
    batch_shards,
    platform_of,
    replicated,
    state_shardings,
    tree_shardings,
    unpacked,
)

# A batch: a dict of ``[B, ...]`` arrays, or the same packed for one transfer.
Batch = dict[str, jax.Array] | PackedBatch
StepFn = Callable[[Batch, TrainState], tuple[TrainState, dict[str, jax.Array]]]
EvalFn = Callable[[Batch, TrainState], dict[str, jax.Array]]


def _sums(loss_fn: LossFn, params: PyTree, frozen: PyTree, batch: dict, key: jax.Array) -> tuple:
    # On a context axis the sequences are laid out for causal load balancing first: the sums
    # are over tokens, so their order does not change them.
    with balanced_sequences(batch) as laid:
        loss_sum, aux = loss_fn(eqx.combine(params, frozen), laid, key)
    if "weight" not in aux:
        raise ValueError("The loss function's aux dict must hold 'weight' (the counted units).")
    return jnp.asarray(loss_sum, jnp.float32), {
        k: jnp.asarray(v, jnp.float32) for k, v in aux.items()
    }


def all_finite(tree: PyTree) -> jax.Array:
    """Whether every floating-point value of ``tree`` is finite (a scalar bool)."""
    leaves = [x for x in jax.tree.leaves(tree) if eqx.is_inexact_array(x)]
    return functools.reduce(
        jnp.logical_and, [jnp.isfinite(x).all() for x in leaves], jnp.array(True)
    )


def split_micro_batches(batch: PyTree, grad_accum: int, shards: int = 1) -> PyTree:
    """``[grad_accum * mb, ...]`` leaves as ``[grad_accum, mb, ...]`` micro-batches.

    With ``shards`` data-parallel shards (the rows split in ``shards`` contiguous blocks, one per
    device), micro-batch ``i`` takes the ``i``-th ``mb / shards`` rows of every block, so each
    device keeps its own rows and no data moves; with one shard the micro-batches are
    consecutive slices. The gradient is a sum over all rows either way.
    """

    def split(x: jax.Array) -> jax.Array:
        rest = x.shape[1:]
        x = x.reshape(shards, grad_accum, -1, *rest).swapaxes(0, 1)
        return x.reshape(grad_accum, -1, *rest)

    return jax.tree.map(split, batch)


def _pin(tree: PyTree, shardings: PyTree | None) -> PyTree:
    return tree if shardings is None else jax.lax.with_sharding_constraint(tree, shardings)


def accumulate_gradients(
    loss_fn: LossFn,
    params: PyTree,
    frozen: PyTree,
    batch: dict,
    key: jax.Array,
    grad_accum: int,
    *,
    shards: int = 1,
    grad_shardings: PyTree | None = None,
) -> tuple[jax.Array, dict[str, jax.Array], PyTree]:
    """Summed loss, summed aux and summed gradient over ``grad_accum`` micro-batches.

    ``batch`` leaves have a leading dimension ``grad_accum * micro_batch``; the micro-batches are
    split by :func:`split_micro_batches` (``shards``: how many ways the rows are sharded) and
    processed by ``lax.scan``, so only one micro-batch's activations live at a time.
    ``grad_shardings`` (the parameters' shardings) pins the gradients' layout.
    """
    grad_fn = eqx.filter_value_and_grad(
        lambda p, b, k: _sums(loss_fn, p, frozen, b, k), has_aux=True
    )
    if grad_accum == 1:
        (loss_sum, aux), grads = grad_fn(params, batch, key)
        return loss_sum, aux, _pin(grads, grad_shardings)
    micro = split_micro_batches(batch, grad_accum, shards)
    micro = jax.tree.map(
        lambda x: zoo_layers.logical_constraint(x, (None, zoo_layers.BATCH)), micro
    )
    keys = jax.random.split(key, grad_accum)
    zero_grads = _pin(jax.tree.map(jnp.zeros_like, params), grad_shardings)
    (_, aux_shape), _ = eqx.filter_eval_shape(
        grad_fn, params, jax.tree.map(lambda x: x[0], micro), keys[0]
    )
    zero_aux = {k: jnp.zeros(v.shape, jnp.float32) for k, v in aux_shape.items()}

    def body(carry: tuple, xs: tuple) -> tuple:
        loss_acc, aux_acc, grad_acc = carry
        mb, k = xs
        (loss_sum, aux), grads = grad_fn(params, mb, k)
        grad_acc = _pin(jax.tree.map(jnp.add, grad_acc, grads), grad_shardings)
        aux_acc = {n: aux_acc[n] + aux[n] for n in aux_acc}
        return (loss_acc + loss_sum, aux_acc, grad_acc), None

    (loss_sum, aux, grads), _ = jax.lax.scan(
        body, (jnp.zeros((), jnp.float32), zero_aux, zero_grads), (micro, keys)
    )
    return loss_sum, aux, grads


def _balanced(frozen: PyTree, counts: jax.Array | None, keep: Callable) -> PyTree:
    """Auxiliary-loss-free balancing: the routers' correction biases (frozen arrays, outside
    the optimizer) moved by the step's expert ``counts``, kept only where ``keep`` keeps the
    step; ``frozen`` itself without counts or routers to balance."""
    if counts is None or not callable(getattr(frozen, "balance_routers", None)):
        return frozen
    return keep(frozen.balance_routers(counts), frozen)


def make_train_step(
    optimizer: optax.GradientTransformation,
    loss_fn: LossFn,
    schedule: optax.Schedule,
    *,
    grad_accum: int = 1,
    compiler_options: dict[str, str] | None = None,
    mesh: Mesh | None = None,
    rules: Mapping[str, MeshAxes] | None = None,
    packed_metrics: bool = False,
) -> MeshFunction:
    """``step(batch, state) -> (state, metrics)``, jitted, donating the state's buffers.

    With a ``mesh`` (and the sharding ``rules``), the step is traced under it: the batch rows are
    split over the data-parallel axes, the state is laid out by the layers' logical axis names
    (:func:`zoo_train.parallel.state_shardings`) on input and output alike (so the step
    compiles once), the gradients are pinned to the parameters' layout, and micro-batches are
    split without moving data. Without a mesh it is a plain jitted step on the default device.
    ``step.lower(batch, state)`` accepts abstract arguments for ahead-of-time compilation.

    The gradient is the sum over micro-batches divided by the total ``weight`` (the token mean of
    the whole step). If the loss, the gradient norm, or any value of the updated parameters or
    optimizer state is not finite, the parameters and optimizer state are left unchanged
    (``metrics["finite"]`` is false and ``state.skipped`` counts it); the loop decides whether
    to stop or go on.

    ``metrics``: ``loss``, ``weight``, ``grad_norm`` (before clipping), ``lr`` (of this update),
    ``finite``, ``update_finite`` (the updated state alone) and each other ``aux`` entry divided
    by ``weight``.

    ``packed_metrics=True`` returns them as one :class:`PackedMetrics` (a float32 vector;
    ``.unpack()`` gives the dict on the host), read in one transfer.

    ``compiler_options`` are XLA options for the step; ``None`` uses
    :func:`step_compiler_options` for the mesh's platform (or the default backend), ``{}``
    none at all.
    """
    rules = rules or {}
    shards = 1 if mesh is None else batch_shards(mesh, rules)

    def step(
        batch: Batch, state: TrainState
    ) -> tuple[TrainState, PackedMetrics | dict[str, jax.Array]]:
        batch = unpacked(batch)
        key = jax.random.wrap_key_data(state.key)
        next_key, step_key = jax.random.split(key)
        grad_shardings = None if mesh is None else tree_shardings(state.params, mesh, rules)
        loss_sum, aux, grads = accumulate_gradients(
            loss_fn,
            state.params,
            state.frozen,
            batch,
            step_key,
            grad_accum,
            shards=shards,
            grad_shardings=grad_shardings,
        )
        counts = aux.pop(ROUTER_COUNTS, None)
        weight = jnp.maximum(aux["weight"], 1.0)
        grads = jax.tree.map(lambda g: g / weight, grads)
        loss = loss_sum / weight
        with jax.named_scope("optimizer"):  # names its buffers in `zoo compile`'s peak
            grad_norm = optax.tree.norm(grads)
            updates, new_opt_state = optimizer.update(grads, state.opt_state, state.params)
            new_params = optax.apply_updates(state.params, updates)
            # A finite gradient can still make an infinite update (a huge learning rate):
            # checked on the device, so a non-finite state is never kept, let alone saved.
            update_finite = all_finite(new_params) & all_finite(new_opt_state)
            finite = jnp.isfinite(loss) & jnp.isfinite(grad_norm) & update_finite
            # In the old leaves' dtypes: float32 gradients would otherwise promote the moments
            # of bfloat16 parameters, and the state would change type under a resumed run.
            keep = lambda new, old: jax.tree.map(
                lambda a, b: jnp.where(finite, a, b).astype(b.dtype), new, old
            )
            kept_params = keep(new_params, state.params)
            kept_opt_state = keep(new_opt_state, state.opt_state)
            frozen = _balanced(state.frozen, counts, keep)
        new_state = TrainState(
            params=kept_params,
            frozen=frozen,
            opt_state=kept_opt_state,
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
            "update_finite": update_finite,
        }
        metrics.update({k: v / weight for k, v in aux.items() if k != "weight"})
        return new_state, PackedMetrics.pack(metrics) if packed_metrics else metrics

    return _mesh_function(step, optimizer, mesh, rules, compiler_options, donate_state=True)


def make_eval_step(
    loss_fn: LossFn,
    *,
    compiler_options: dict[str, str] | None = None,
    mesh: Mesh | None = None,
    rules: Mapping[str, MeshAxes] | None = None,
    optimizer: optax.GradientTransformation | None = None,
) -> MeshFunction:
    """``eval_step(batch, state) -> {"loss_sum", **aux sums}`` (jitted, no donation).

    ``compiler_options``, ``mesh`` and ``rules`` as for :func:`make_train_step`; with a mesh,
    ``optimizer`` (the state's) fixes the layout of the state it is handed; without it the
    state is used where it is.
    """

    def eval_step(batch: Batch, state: TrainState) -> dict:
        loss_sum, aux = _sums(
            loss_fn, state.params, state.frozen, unpacked(batch), jax.random.key(0)
        )
        aux.pop(ROUTER_COUNTS, None)
        return {"loss_sum": loss_sum, **aux}

    return _mesh_function(
        eval_step, optimizer, mesh, rules or {}, compiler_options, donate_state=False
    )


def _mesh_function(
    fn: Callable,
    optimizer: optax.GradientTransformation | None,
    mesh: Mesh | None,
    rules: Mapping[str, MeshAxes],
    compiler_options: dict[str, str] | None,
    *,
    donate_state: bool,
) -> MeshFunction:
    if compiler_options is None:
        compiler_options = step_compiler_options(None if mesh is None else platform_of(mesh))
    donate = (1,) if donate_state else ()  # the state; batch buffers cannot alias outputs
    if mesh is None:
        return MeshFunction(fn, donate=donate, compiler_options=compiler_options)

    def state_layout(state: TrainState) -> PyTree:
        assert optimizer is not None
        return state_shardings(state, optimizer, mesh, rules)

    def out_layout(batch: PyTree, state: TrainState) -> PyTree:
        rep = replicated(mesh)
        return (state_layout(state), rep) if donate_state else rep

    # Without the optimizer the state's layout cannot be planned (its optimizer state would
    # not be recognised): an evaluation then uses the state where it is.
    return MeshFunction(
        fn,
        mesh=mesh,
        rules=rules,
        in_shardings=(
            lambda batch: batch_shardings(batch, mesh, rules),
            state_layout if optimizer is not None else None,
        ),
        out_shardings=out_layout,
        donate=donate,
        compiler_options=compiler_options,
    )
