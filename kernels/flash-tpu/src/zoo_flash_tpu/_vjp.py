"""The ``custom_vjp``: forward kernel, then the dQ and dK/dV kernels from O(T) residuals.

Residuals are the inputs, the output (in the kernel layout, ready for the ``delta`` kernel)
and the float32 log-sum-exp ``[B, N, 1, Tp]``; the
score matrix is recomputed block by block in the backward kernels, never stored.
"""

from __future__ import annotations

import functools

import jax

from . import _calls
from ._config import FlashConfig

Residuals = tuple[jax.Array, ...]


@functools.partial(jax.custom_vjp, nondiff_argnums=(5,))
def flash_attention_vjp(
    query: jax.Array,
    key: jax.Array,
    value: jax.Array,
    q_ids: jax.Array | None,
    kv_ids: jax.Array | None,
    cfg: FlashConfig,
) -> jax.Array:
    """Differentiable flash attention: ``[B, T, N, H]`` out for the layout of ``_calls.forward``."""
    ids = None if q_ids is None else (q_ids, kv_ids)
    return _calls.forward(query, key, value, ids, cfg)[0]


def _fwd(
    query: jax.Array,
    key: jax.Array,
    value: jax.Array,
    q_ids: jax.Array | None,
    kv_ids: jax.Array | None,
    cfg: FlashConfig,
) -> tuple[jax.Array, Residuals]:
    ids = None if q_ids is None else (q_ids, kv_ids)
    out, out_kernel, lse = _calls.forward(query, key, value, ids, cfg)
    return out, (query, key, value, q_ids, kv_ids, out_kernel, lse)


def _bwd(cfg: FlashConfig, res: Residuals, d_out: jax.Array) -> tuple[jax.Array | None, ...]:
    query, key, value, q_ids, kv_ids, out_kernel, lse = res
    ids = None if q_ids is None else (q_ids, kv_ids)
    q, k, v, do = _calls.backward_inputs(query, key, value, d_out, cfg)
    delta = _calls.backward_delta(out_kernel, do, cfg)
    dq = _calls.backward_dq(q, k, v, do, lse, delta, ids, cfg)
    dk, dv = _calls.backward_dkdv(q, k, v, do, lse, delta, ids, cfg)
    return dq, dk, dv, None, None


flash_attention_vjp.defvjp(_fwd, _bwd)
