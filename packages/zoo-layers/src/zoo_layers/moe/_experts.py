"""The dropless expert computation on one device: sort the assignments by expert, run each
expert's gated MLP on its rows with grouped matmuls, weight the rows and add them back per token.
No capacity: every assignment is computed, however unevenly the router spreads them."""

from __future__ import annotations

import jax.numpy as jnp
from jaxtyping import Array, Float, Int

from .._mlp import activation_fn
from ._grouped import grouped_matmul
from ._tiled import move_rows


def expert_mlp(
    x: Float[Array, "R D"],
    experts: Int[Array, "R k"],
    weights: Float[Array, "R k"],
    gate: Float[Array, "El D I"],
    up: Float[Array, "El D I"],
    down: Float[Array, "El I D"],
    *,
    first: Int[Array, ""] | int = 0,
    activation: str = "silu",
    implementation: str | None = None,
) -> Float[Array, "R D"]:
    """``sum_k weights[r, k] * mlp_{experts[r, k]}(x[r])`` over the assignments to the local
    experts ``first .. first + El - 1`` (the others add nothing; a device holding a shard of the
    experts computes its share). ``mlp_e(x) = down_e(act(gate_e(x)) * up_e(x))``. Accumulated in
    float32, returned in ``x``'s dtype."""
    rows, k = experts.shape
    n_local = gate.shape[0]
    local = experts.reshape(-1) - first
    mine = (local >= 0) & (local < n_local)
    key = jnp.where(mine, local, n_local)
    order = jnp.argsort(key, stable=True).astype(jnp.int32)
    # The inverse permutation: assignment j sits at row inv[j] of the sorted rows. Moving rows
    # both ways by gathers (no scatter-add, slow on CPU, in either direction of autodiff).
    inv = jnp.argsort(order).astype(jnp.int32)
    sizes = jnp.bincount(key, length=n_local + 1)[:n_local].astype(jnp.int32)
    xs = move_rows(jnp.repeat(x, k, axis=0), order, inv)
    act = activation_fn(activation)
    mm = lambda a, w: grouped_matmul(a, w, sizes, implementation=implementation)
    out = mm(act(mm(xs, gate)) * mm(xs, up), down)
    weight = jnp.take(weights.reshape(-1), order)
    # Rows of other devices' experts hold no result (a kernel may leave them unwritten).
    out = jnp.where(mine[order][:, None], out.astype(jnp.float32) * weight[:, None], 0.0)
    per_assignment = move_rows(out, inv, order).reshape(rows, k, -1)
    return jnp.sum(per_assignment, axis=1).astype(x.dtype)
