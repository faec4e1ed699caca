"""Backward kernel body for dK and dV: one key block accumulates over every query that sees it.

Grid ``(B, K, kv_blocks, G, q_steps)``: for GQA the ``G`` query heads sharing a key/value head
are a reduction axis, so dK/dV are summed in VMEM and never materialised per query head. The
kernel works on the transposed scores ``sT = k @ q.T`` (``[block_kv, block_q]``) so that the
per-query rows (lse, delta, segment ids) broadcast down the sublanes as loaded:
``pT = exp(sT - lse)``, ``dv += pT @ dO``, ``dsT = pT * (v @ dO.T - delta)``, ``dk += dsT @ q``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from . import _ops
from ._config import FlashConfig
from ._mask import block_fully_visible, segments_overlap, segments_uniform, visible


def dkdv_kernel(
    *refs: jax.Array, cfg: FlashConfig, block_q: int, block_kv: int, steps: int
) -> None:
    """One grid step. Refs: prefetch (lo, hi[, q_min, q_max, kv_min, kv_max]), inputs
    (q, k, v, dO, lse, delta[, q_ids, kv_ids]), outputs (dk, dv), scratch (dk acc, dv acc
    [, kv_ids column])."""
    seg = cfg.has_segments
    n_pre = 6 if seg else 2
    pre, refs = refs[:n_pre], refs[n_pre:]
    n_in = 8 if seg else 6
    ins, refs = refs[:n_in], refs[n_in:]
    (dk_ref, dv_ref), scratch = refs[:2], refs[2:]
    q_ref, k_ref, v_ref, do_ref, lse_ref, delta_ref = ins[:6]
    dk_acc, dv_acc = scratch[:2]

    b, _, jb, g, i = (pl.program_id(a) for a in range(5))
    nk = pl.num_programs(2)
    groups = pl.num_programs(3)
    nq = cfg.q_len_padded // block_q
    row = b * nk + jb
    lo, hi = pre[0][row], pre[1][row]
    ib = lo + i
    active = ib <= hi
    q_first = ib * block_q
    kv_first = jb * block_kv
    full = block_fully_visible(
        q_first, q_first + block_q - 1, kv_first, kv_first + block_kv - 1, cfg
    )
    if seg:
        col = b * nq + jnp.minimum(ib, nq - 1)
        q_min, q_max = pre[2][col], pre[3][col]
        kv_min, kv_max = pre[4][row], pre[5][row]
        active = active & segments_overlap(q_min, q_max, kv_min, kv_max)
        full = full & segments_uniform(q_min, q_max, kv_min, kv_max)
        kv_ids_col = scratch[2]

    first_step = (g == 0) & (i == 0)

    @pl.when(first_step)
    def _init() -> None:
        dk_acc[...] = jnp.zeros(dk_acc.shape, jnp.float32)
        dv_acc[...] = jnp.zeros(dv_acc.shape, jnp.float32)
        if seg:
            kv_ids_col[...] = _ops.row_to_column(ins[7][...])

    def step(masked: bool) -> None:
        q = q_ref[...]
        do = do_ref[...]
        s = _ops.dot_nt(k_ref[...], q) * cfg.scale  # [block_kv, block_q]
        s, tanh = _ops.soft_cap(s, cfg.soft_cap)
        if masked:
            shape = (block_kv, block_q)
            mask = visible(
                _ops.positions(q_first, shape, 1),
                _ops.positions(kv_first, shape, 0),
                cfg,
                ins[6][...] if seg else None,
                kv_ids_col[:, :1] if seg else None,
            )
            s = jnp.where(mask, s, _ops.MASK_VALUE)
        p = jnp.exp(s - lse_ref[...])  # masked entries and empty rows (lse = +inf) give 0
        dv_acc[...] += _ops.dot_nn(p.astype(do.dtype), do)
        dp = _ops.dot_nt(v_ref[...], do)
        ds = p * (dp - delta_ref[...])
        if tanh is not None:
            ds = ds * (1.0 - tanh * tanh)
        dk_acc[...] += _ops.dot_nn(ds.astype(q.dtype), q)

    pl.when(active & full)(lambda: step(False))
    pl.when(active & jnp.logical_not(full))(lambda: step(True))

    @pl.when((g == groups - 1) & (i == steps - 1))
    def _finish() -> None:
        dk_ref[...] = (dk_acc[...] * cfg.scale).astype(dk_ref.dtype)
        dv_ref[...] = dv_acc[...].astype(dv_ref.dtype)
