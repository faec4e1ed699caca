"""Backward kernel body for dK and dV: one key block accumulates over every query that sees it.

Grid ``(B, K, kv_blocks, G, q_steps)``: for GQA the ``G`` query heads sharing a key/value head
are a reduction axis, so dK/dV are summed in VMEM and never materialised per query head. The
kernel works on the transposed scores ``sT = k @ q.T`` (``[block_kv, block_q]``) so that the
per-query rows (lse, delta, segment ids) broadcast down the sublanes as loaded:
``pT = exp(sT - lse)``, ``dv += pT @ dO``, ``dsT = pT * (v @ dO.T - delta)``, ``dk += dsT @ q``
(``k`` is scaled once per key block into VMEM, so ``sT`` needs no scale, and ``dk`` gets it
once at the end: ``d sT / d k = scale · q``).
"""

from __future__ import annotations

import jax.numpy as jnp
from jax.experimental import pallas as pl

from . import _ops
from ._config import FlashConfig
from ._mask import block_fully_visible, segments_overlap, segments_uniform, visible
from ._refs import Refs


def dkdv_kernel(r: Refs, *, cfg: FlashConfig, block_q: int, block_kv: int, steps: int) -> None:
    """One grid step.

    Refs: prefetch ``lo, hi[, q_min, q_max, kv_min, kv_max]``; inputs ``q (bq, Hp)``,
    ``do (bq, Hvp)``, ``k (bk, Hp)``, ``v (bk, Hvp)``, ``lse, delta (1, bq)``[, ``q_ids``,
    ``kv_ids``]; outputs ``dk (bk, Hp)``, ``dv (bk, Hvp)``; scratch ``dk_acc (bk, Hp)``,
    ``dv_acc (bk, Hvp)``, ``k_scaled (bk, Hp)``
    [, ``kv_ids_col``].
    """
    seg = cfg.has_segments
    b, _, jb, g, i = (pl.program_id(a) for a in range(5))
    nk = pl.num_programs(2)
    groups = pl.num_programs(3)
    nq = cfg.q_len_padded // block_q
    row = b * nk + jb
    lo, hi = r.lo[row], r.hi[row]
    ib = lo + i
    active = ib <= hi
    q_first = ib * block_q
    kv_first = jb * block_kv
    full = block_fully_visible(
        q_first, q_first + block_q - 1, kv_first, kv_first + block_kv - 1, cfg
    )
    if seg:
        col = b * nq + jnp.minimum(ib, nq - 1)
        q_min, q_max = r.q_min[col], r.q_max[col]
        kv_min, kv_max = r.kv_min[row], r.kv_max[row]
        active = active & segments_overlap(q_min, q_max, kv_min, kv_max)
        full = full & segments_uniform(q_min, q_max, kv_min, kv_max)

    @pl.when((g == 0) & (i == 0))
    def _init() -> None:
        r.dk_acc[...] = jnp.zeros(r.dk_acc.shape, jnp.float32)
        r.dv_acc[...] = jnp.zeros(r.dv_acc.shape, jnp.float32)
        r.k_scaled[...] = _ops.scaled(r.k[...], cfg.scale)
        if seg:
            r.kv_ids_col[...] = _ops.row_to_column(r.kv_ids[...])

    def step(masked: bool) -> None:
        q = r.q[...]
        do = r.do[...]
        s = _ops.dot_nt(r.k_scaled[...], q)  # [block_kv, block_q]
        s, tanh = _ops.soft_cap(s, cfg.soft_cap)
        if masked:
            shape = (block_kv, block_q)
            mask = visible(
                _ops.positions(q_first, shape, 1),
                _ops.positions(kv_first, shape, 0),
                cfg,
                r.q_ids[...] if seg else None,
                r.kv_ids_col[:, :1] if seg else None,
            )
            s = jnp.where(mask, s, _ops.MASK_VALUE)
        p = jnp.exp(s - r.lse[...])  # masked entries and empty rows (lse = +inf) give 0
        r.dv_acc[...] += _ops.dot_nn(p.astype(do.dtype), do)
        dp = _ops.dot_nt(r.v[...], do)
        ds = p * (dp - r.delta[...])
        if tanh is not None:
            ds = ds * (1.0 - tanh * tanh)
        r.dk_acc[...] += _ops.dot_nn(ds.astype(q.dtype), q)  # times the scale at the end

    pl.when(active & full)(lambda: step(False))
    pl.when(active & jnp.logical_not(full))(lambda: step(True))

    @pl.when((g == groups - 1) & (i == steps - 1))
    def _finish() -> None:
        r.dk[...] = (r.dk_acc[...] * cfg.scale).astype(r.dk.dtype)
        r.dv[...] = r.dv_acc[...].astype(r.dv.dtype)
