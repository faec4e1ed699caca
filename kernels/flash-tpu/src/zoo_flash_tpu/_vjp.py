"""The ``custom_vjp``: forward kernel, then the dQ and dK/dV kernels from O(T) residuals.

Residuals are saved in the kernels' own HBM layout, as the forward made them: ``q``
``[B, Tp, N·Hp]``, ``k`` ``[B, Sp, K·Hp]`` and ``v`` ``[B, Sp, K·Hvp]``, the output
``[B, Tp, N·Hvp]`` and the float32 log-sum-exp ``[B, N, 1, Tp]`` (with the sinks, when there
are any: their gradient, ``-sum_rows exp(sink - lse) · delta``, is O(T) and taken here). The backward then relays out only the incoming
``dO``; the score matrix is recomputed block by block in the backward kernels, never stored.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from . import _calls, _layout
from ._config import FlashConfig

# The kernel-layout q, k, v, out and lse, then the sinks and the segment ids.
Residuals = tuple[
    jax.Array,
    jax.Array,
    jax.Array,
    jax.Array,
    jax.Array,
    jax.Array | None,
    jax.Array | None,
    jax.Array | None,
]


def _segment_ids(q_ids: jax.Array | None, kv_ids: jax.Array | None) -> _calls.SegmentIds:
    # The caller passes both or neither; they travel apart only as custom_vjp arguments.
    return None if q_ids is None or kv_ids is None else (q_ids, kv_ids)


@functools.partial(jax.custom_vjp, nondiff_argnums=(6,))
def flash_attention_vjp(
    query: jax.Array,
    key: jax.Array,
    value: jax.Array,
    sinks: jax.Array | None,
    q_ids: jax.Array | None,
    kv_ids: jax.Array | None,
    cfg: FlashConfig,
) -> jax.Array:
    """Differentiable flash attention ``[B, T, N, Hv]`` (see ``_calls.forward``)."""
    ids = _segment_ids(q_ids, kv_ids)
    return _calls.forward(query, key, value, sinks, ids, cfg)[0]


def _fwd(
    query: jax.Array,
    key: jax.Array,
    value: jax.Array,
    sinks: jax.Array | None,
    q_ids: jax.Array | None,
    kv_ids: jax.Array | None,
    cfg: FlashConfig,
) -> tuple[jax.Array, Residuals]:
    ids = _segment_ids(q_ids, kv_ids)
    out, kernel_layout = _calls.forward(query, key, value, sinks, ids, cfg)
    return out, (*kernel_layout, sinks, q_ids, kv_ids)


def _bwd(cfg: FlashConfig, res: Residuals, d_out: jax.Array) -> tuple[jax.Array | None, ...]:
    q, k, v, out, lse, sinks, q_ids, kv_ids = res
    ids = _segment_ids(q_ids, kv_ids)
    do = _layout.to_kernel(d_out.astype(q.dtype), cfg.q_len_padded, cfg.v_head_dim_padded)
    delta = _calls.backward_delta(out, do, cfg)
    dq = _calls.backward_dq(q, k, v, do, lse, delta, ids, cfg)
    dk, dv = _calls.backward_dkdv(q, k, v, do, lse, delta, ids, cfg)
    dsinks = None
    if sinks is not None:
        # Rows that see no key have lse = +inf, padded rows delta = 0: neither adds a term.
        weight = jnp.exp(sinks.astype(jnp.float32)[None, :, None, None] - lse)
        dsinks = (-jnp.sum(weight * delta, axis=(0, 2, 3))).astype(sinks.dtype)
    return dq, dk, dv, dsinks, None, None


flash_attention_vjp.defvjp(_fwd, _bwd)
