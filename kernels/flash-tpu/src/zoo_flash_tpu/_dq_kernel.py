"""Backward kernel body for dQ: one query block accumulates over its key blocks.

Grid ``(B, N / P, q_blocks, kv_steps)`` like the forward: the ``P`` query heads of a group share
each key/value block and the element mask. It recomputes ``p = exp(s - lse)`` from the saved
log-sum-exp, then ``ds = p * (dO @ v.T - delta)`` and ``dq += ds @ k``; ``delta`` is
``rowsum(dO * O)``. Key blocks are computed in sub-blocks of ``block_kv_bwd_compute`` keys.
``q`` is scaled once per query block into VMEM, as in the forward, and ``dq`` gets the scale
once at the end. The per-query rows (lse, delta, segment ids) are turned into columns once per
query block, at the first step.
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
from jax.experimental import pallas as pl

from . import _ops
from ._config import FlashConfig
from ._query_block import each_sub_block, head_scores, query_block_step
from ._refs import Refs


def dq_kernel(r: Refs, *, cfg: FlashConfig, block_q: int, block_kv: int, steps: int) -> None:
    """One grid step.

    Refs: prefetch ``lo, hi[, q_min, q_max, kv_min, kv_max]``; inputs ``q (bq, P·Hp)``,
    ``do (bq, P·Hvp)``, ``k (bk, Hp)``, ``v (bk, Hvp)``, ``lse, delta (P, 1, bq)``[, ``q_ids``, ``kv_ids``]; output
    ``dq (bq, P·Hp)``; scratch ``acc (P, bq, Hp)``, ``lse_col, delta_col (P, bq, 128)``,
    ``q_scaled (bq, P·Hp)``[, ``q_ids_col``].
    """
    heads, hp, hvp = cfg.heads_per_step, cfg.head_dim_padded, cfg.v_head_dim_padded
    at = query_block_step(r, cfg, block_q, block_kv)

    @pl.when(at.j == 0)
    def _init() -> None:
        r.acc[...] = jnp.zeros(r.acc.shape, jnp.float32)
        r.q_scaled[...] = _ops.scaled(r.q[...], cfg.scale)

        def head(h: Any, cols: Any) -> None:
            r.lse_col[h] = _ops.row_to_column(r.lse[h])
            r.delta_col[h] = _ops.row_to_column(r.delta[h])

        _ops.for_each_head(heads, hp, head)
        if cfg.has_segments:
            r.q_ids_col[...] = _ops.row_to_column(r.q_ids[...])

    def sub_block(keys: slice, mask: Any) -> None:
        k = r.k[keys, :]
        v = r.v[keys, :]

        def head(h: Any, cols: Any) -> None:  # P heads against the same k, v and mask
            s, tanh = head_scores(r.q_scaled[:, cols], k, mask, cfg)
            p = jnp.exp(s - r.lse_col[h][:, :1])  # masked entries, empty rows (lse=+inf): 0
            dp = _ops.dot_nt(r.do[:, _ops.head_columns(h, hvp)], v)
            ds = p * (dp - r.delta_col[h][:, :1])
            if tanh is not None:
                ds = ds * (1.0 - tanh * tanh)
            r.acc[h] = r.acc[h] + _ops.dot_nn(ds.astype(k.dtype), k)

        _ops.for_each_head(heads, hp, head)

    each_sub_block(r, cfg, at, block_q, block_kv, cfg.blocks.kv_bwd_compute, sub_block)

    @pl.when(at.j == steps - 1)
    def _finish() -> None:
        def head(h: Any, cols: Any) -> None:
            r.dq[:, cols] = (r.acc[h] * cfg.scale).astype(r.dq.dtype)

        _ops.for_each_head(heads, hp, head)
