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


@functools.partial(jax.custom_vjp, nondiff_argnums=(7,))
def chunked_attention(
    query: jax.Array,
    key: jax.Array,
    value: jax.Array,
    q_ids: jax.Array | None,
    kv_ids: jax.Array | None,
    q_offset: jax.Array,
    sinks: jax.Array | None,
    plan: Plan,
) -> jax.Array:
    """Blockwise attention ``[B, T, N, Hv]`` with a recomputing backward pass.

    Args:
        query: ``[B, T, N, H]``; key: ``[B, S, K, H]``; value: ``[B, S, K, Hv]``.
        q_ids, kv_ids: int32 segment ids ``[B, T]`` and ``[B, S]``, or both ``None``.
        q_offset: int32 scalar, the position of query row 0 for the causal and window rules.
        sinks: ``[N]`` sink logits (contract 1.3), or ``None``.
        plan: static tiling (see :func:`zoo_chunked._policy.make_plan`).
    """
    return forward(query, key, value, q_ids, kv_ids, q_offset, sinks, plan)[0]


def _fwd(
    query: jax.Array,
    key: jax.Array,
    value: jax.Array,
    q_ids: jax.Array | None,
    kv_ids: jax.Array | None,
    q_offset: jax.Array,
    sinks: jax.Array | None,
    plan: Plan,
) -> tuple[jax.Array, tuple]:
    out, lse = forward(query, key, value, q_ids, kv_ids, q_offset, sinks, plan)
    return out, (query, key, value, q_ids, kv_ids, q_offset, sinks, out, lse)


def _bwd(plan: Plan, residuals: tuple, d_out: jax.Array) -> tuple:
    query, key, value, q_ids, kv_ids, q_offset, sinks, out, lse = residuals
    dq, dk, dv, dsinks = backward(
        query, key, value, q_ids, kv_ids, q_offset, sinks, out, lse, d_out, plan
    )
    # Segment ids and the offset are integers: no cotangent.
    return dq, dk, dv, None, None, None, dsinks


chunked_attention.defvjp(_fwd, _bwd)
