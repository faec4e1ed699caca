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
from ._mask import block_fully_visible, segments_overlap, segments_uniform, visible


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

    b, _, i, j = (pl.program_id(a) for a in range(4))
    nq = pl.num_programs(2)
    nk = cfg.kv_len_padded // block_kv
    row = b * nq + i
    lo, hi = pre[0][row], pre[1][row]
    jb = lo + j
    active = jb <= hi
    q_first = i * block_q
    kv_first = jb * block_kv
    full = block_fully_visible(
        q_first, q_first + block_q - 1, kv_first, kv_first + block_kv - 1, cfg
    )
    if seg:
        q_min, q_max = pre[2][row], pre[3][row]
        col = b * nk + jnp.minimum(jb, nk - 1)
        kv_min, kv_max = pre[4][col], pre[5][col]
        active = active & segments_overlap(q_min, q_max, kv_min, kv_max)
        full = full & segments_uniform(q_min, q_max, kv_min, kv_max)
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
