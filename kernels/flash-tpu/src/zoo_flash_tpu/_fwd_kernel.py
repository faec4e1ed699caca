"""Forward kernel body: online-softmax attention of one query block over its key blocks.

Grid ``(B, N, q_blocks, kv_steps)``; the last axis walks key blocks ``lo..hi`` of the query
block (see ``_mask_info``) and carries the running max ``m``, normaliser ``l`` and unnormalised
output ``acc`` in VMEM scratch. Scores are ``q @ k.T`` in the input dtype with float32
accumulation; the probabilities are cast back to the input dtype for ``p @ v``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from . import _ops
from ._config import FlashConfig
from ._mask import visible
from ._query_block import query_block_step


def forward_kernel(
    *refs: jax.Array, cfg: FlashConfig, block_q: int, block_kv: int, steps: int
) -> None:
    """One grid step. Refs: prefetch (lo, hi[, q_min, q_max, kv_min, kv_max]), inputs
    (q, k, v[, q_ids, kv_ids]), outputs (o, lse), scratch (m, l, acc[, q_ids column])."""
    seg = cfg.has_segments
    n_pre = 6 if seg else 2
    pre, refs = refs[:n_pre], refs[n_pre:]
    n_in = 5 if seg else 3
    ins, refs = refs[:n_in], refs[n_in:]
    (o_ref, lse_ref), scratch = refs[:2], refs[2:]
    q_ref, k_ref, v_ref = ins[:3]
    m_ref, l_ref, acc_ref = scratch[:3]

    step_at = query_block_step(pre, cfg, block_q, block_kv)
    j, q_first, kv_first = step_at.j, step_at.q_first, step_at.kv_first
    active, full = step_at.active, step_at.full
    if seg:
        q_ids_col = scratch[3]

    @pl.when(j == 0)
    def _init() -> None:
        m_ref[...] = jnp.full(m_ref.shape, -jnp.inf, jnp.float32)
        l_ref[...] = jnp.zeros(l_ref.shape, jnp.float32)
        acc_ref[...] = jnp.zeros(acc_ref.shape, jnp.float32)
        if seg:
            q_ids_col[...] = _ops.row_to_column(ins[3][...])

    def step(masked: bool) -> None:
        s = _ops.dot_nt(q_ref[...], k_ref[...]) * cfg.scale
        s, _ = _ops.soft_cap(s, cfg.soft_cap)
        if masked:
            shape = (block_q, block_kv)
            mask = visible(
                _ops.positions(q_first, shape, 0),
                _ops.positions(kv_first, shape, 1),
                cfg,
                q_ids_col[:, :1] if seg else None,
                ins[4][...] if seg else None,
            )
            s = jnp.where(mask, s, _ops.MASK_VALUE)
        m_prev = m_ref[...]
        m_next = jnp.maximum(m_prev, jnp.max(s, axis=1, keepdims=True))
        alpha = jnp.exp(m_prev - m_next)
        p = jnp.exp(s - m_next[:, :1])
        l_ref[...] = alpha * l_ref[...] + jnp.sum(p, axis=1, keepdims=True)
        m_ref[...] = m_next
        pv = _ops.dot_nn(p.astype(v_ref.dtype), v_ref[...])
        acc_ref[...] = acc_ref[...] * alpha[:, :1] + pv

    pl.when(active & full)(lambda: step(False))
    pl.when(active & jnp.logical_not(full))(lambda: step(True))

    @pl.when(j == steps - 1)
    def _finish() -> None:
        m = m_ref[...]
        norm = l_ref[...]
        empty = m < _ops.EMPTY_BELOW  # rows that saw no key: zeros out, +inf log-sum-exp
        norm = jnp.where(empty, 1.0, norm)
        inv = jnp.where(empty, 0.0, 1.0 / norm)
        o_ref[...] = (acc_ref[...] * inv[:, :1]).astype(o_ref.dtype)
        lse = jnp.where(empty, jnp.inf, m + jnp.log(norm))
        lse_ref[...] = _ops.column_to_row(lse)
