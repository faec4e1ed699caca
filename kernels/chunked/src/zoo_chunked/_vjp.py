"""The ``custom_vjp`` that ties the blockwise forward and backward passes together.

Residuals are the inputs, the output and the O(T) log-sum-exp; the inputs and output are the
caller's own arrays, so the extra memory kept for the backward pass is the log-sum-exp alone.
"""

from __future__ import annotations

import functools

import jax

from ._backward import backward
from ._forward import forward
from ._policy import Plan

Residuals = tuple[jax.Array, ...]


@functools.partial(jax.custom_vjp, nondiff_argnums=(5,))
def chunked_attention(
    query: jax.Array,
    key: jax.Array,
    value: jax.Array,
    q_ids: jax.Array | None,
    kv_ids: jax.Array | None,
    plan: Plan,
) -> jax.Array:
    """Blockwise attention ``[B, T, N, H]`` with a recomputing backward pass.

    Args:
        query: ``[B, T, N, H]``; key, value: ``[B, S, K, H]``.
        q_ids, kv_ids: int32 segment ids ``[B, T]`` and ``[B, S]``, or both ``None``.
        plan: static tiling (see :func:`zoo_chunked._policy.make_plan`).
    """
    return forward(query, key, value, q_ids, kv_ids, plan)[0]


def _fwd(
    query: jax.Array,
    key: jax.Array,
    value: jax.Array,
    q_ids: jax.Array | None,
    kv_ids: jax.Array | None,
    plan: Plan,
) -> tuple[jax.Array, tuple]:
    out, lse = forward(query, key, value, q_ids, kv_ids, plan)
    return out, (query, key, value, q_ids, kv_ids, out, lse)


def _bwd(plan: Plan, residuals: tuple, d_out: jax.Array) -> tuple:
    query, key, value, q_ids, kv_ids, out, lse = residuals
    dq, dk, dv = backward(query, key, value, q_ids, kv_ids, out, lse, d_out, plan)
    # Segment ids are integers: no cotangent.
    return dq, dk, dv, None, None


chunked_attention.defvjp(_fwd, _bwd)
