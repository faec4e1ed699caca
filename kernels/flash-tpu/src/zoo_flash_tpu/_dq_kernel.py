"""Backward kernel body for dQ: one query block accumulates over its key blocks.

Grid ``(B, N, q_blocks, kv_steps)`` like the forward. It recomputes ``p = exp(s - lse)`` from
the saved log-sum-exp, then ``ds = p * (dO @ v.T - delta)`` and ``dq += ds @ k``; ``delta`` is
``rowsum(dO * O)``. The per-query rows (lse, delta, segment ids) are turned into columns once
per query block, at the first step.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from . import _ops
from ._config import FlashConfig
from ._mask import visible
from ._query_block import query_block_step


def dq_kernel(*refs: jax.Array, cfg: FlashConfig, block_q: int, block_kv: int, steps: int) -> None:
    """One grid step. Refs: prefetch (lo, hi[, q_min, q_max, kv_min, kv_max]), inputs
    (q, k, v, dO, lse, delta[, q_ids, kv_ids]), output dq, scratch (acc, lse column,
    delta column[, q_ids column])."""
    seg = cfg.has_segments
    n_pre = 6 if seg else 2
    pre, refs = refs[:n_pre], refs[n_pre:]
    n_in = 8 if seg else 6
    ins, refs = refs[:n_in], refs[n_in:]
    dq_ref, scratch = refs[0], refs[1:]
    q_ref, k_ref, v_ref, do_ref, lse_ref, delta_ref = ins[:6]
    acc_ref, lse_col, delta_col = scratch[:3]

    step_at = query_block_step(pre, cfg, block_q, block_kv)
    j, q_first, kv_first = step_at.j, step_at.q_first, step_at.kv_first
    active, full = step_at.active, step_at.full
    if seg:
        q_ids_col = scratch[3]

    @pl.when(j == 0)
    def _init() -> None:
        acc_ref[...] = jnp.zeros(acc_ref.shape, jnp.float32)
        lse_col[...] = _ops.row_to_column(lse_ref[...])
        delta_col[...] = _ops.row_to_column(delta_ref[...])
        if seg:
            q_ids_col[...] = _ops.row_to_column(ins[6][...])

    def step(masked: bool) -> None:
        q = q_ref[...]
        k = k_ref[...]
        s = _ops.dot_nt(q, k) * cfg.scale
        s, tanh = _ops.soft_cap(s, cfg.soft_cap)
        if masked:
            shape = (block_q, block_kv)
            mask = visible(
                _ops.positions(q_first, shape, 0),
                _ops.positions(kv_first, shape, 1),
                cfg,
                q_ids_col[:, :1] if seg else None,
                ins[7][...] if seg else None,
            )
            s = jnp.where(mask, s, _ops.MASK_VALUE)
        p = jnp.exp(s - lse_col[:, :1])  # masked entries and empty rows (lse = +inf) give 0
        dp = _ops.dot_nt(do_ref[...], v_ref[...])
        ds = p * (dp - delta_col[:, :1])
        if tanh is not None:
            ds = ds * (1.0 - tanh * tanh)
        acc_ref[...] += _ops.dot_nn(ds.astype(k.dtype), k)

    pl.when(active & full)(lambda: step(False))
    pl.when(active & jnp.logical_not(full))(lambda: step(True))

    @pl.when(j == steps - 1)
    def _finish() -> None:
        dq_ref[...] = (acc_ref[...] * cfg.scale).astype(dq_ref.dtype)
