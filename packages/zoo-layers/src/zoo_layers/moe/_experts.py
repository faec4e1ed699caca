"""The dropless expert computation on one device: sort the assignments by expert, run each
expert's gated MLP on its rows with grouped matmuls, weight the rows and add them back per token.
No capacity: every assignment is computed, however unevenly the router spreads them."""

from __future__ import annotations

import jax
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
    gate_bias: Float[Array, "El I"] | None = None,
    up_bias: Float[Array, "El I"] | None = None,
    swiglu_limit: float | None = None,
    swiglu_alpha: float = 1.702,
) -> Float[Array, "R D"]:
    """``sum_k weights[r, k] * mlp_{experts[r, k]}(x[r])`` over the assignments to the local
    experts ``first .. first + El - 1`` (the others add nothing; a device holding a shard of the
    experts computes its share). ``mlp_e(x) = down_e(act(gate_e(x)) * up_e(x))``, the gate and
    up projections with their biases when given; with ``swiglu_limit`` (gpt-oss) the clamped
    SwiGLU ``(clip(u, ±limit) + 1) · g · sigmoid(alpha · g)`` of ``g = min(gate, limit)``.
    Accumulated in float32, returned in ``x``'s dtype. (A down-projection bias is the caller's:
    it is added once per assignment, not per shard of the hidden width.)"""
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
    mm = lambda a, w: grouped_matmul(a, w, sizes, implementation=implementation)
    g, u = mm(xs, gate), mm(xs, up)
    if gate_bias is not None or up_bias is not None:
        # Each sorted row's own expert (rows of other devices' experts read any; they are
        # zeroed below).
        row_expert = jnp.minimum(jnp.take(key, order), n_local - 1)
        if gate_bias is not None:
            g = g + jnp.take(gate_bias, row_expert, axis=0).astype(g.dtype)
        if up_bias is not None:
            u = u + jnp.take(up_bias, row_expert, axis=0).astype(u.dtype)
    if swiglu_limit is None:
        h = activation_fn(activation)(g) * u
    else:
        h = clamped_swiglu(g, u, swiglu_limit, swiglu_alpha)
    out = mm(h, down)
    weight = jnp.take(weights.reshape(-1), order)
    # Rows of other devices' experts hold no result (a kernel may leave them unwritten).
    out = jnp.where(mine[order][:, None], out.astype(jnp.float32) * weight[:, None], 0.0)
    per_assignment = move_rows(out, inv, order).reshape(rows, k, -1)
    return jnp.sum(per_assignment, axis=1).astype(x.dtype)


def clamped_swiglu(gate: Array, up: Array, limit: float, alpha: float) -> Array:
    """gpt-oss's expert activation: ``g = min(gate, limit)``, ``u = clip(up, -limit, limit)``,
    ``(u + 1) · g · sigmoid(alpha · g)``."""
    g = jnp.minimum(gate, limit)
    u = jnp.clip(up, -limit, limit)
    return (u + 1) * (g * jax.nn.sigmoid(g * alpha))
