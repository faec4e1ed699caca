"""Forward kernel body: online-softmax attention of one query block over its key blocks.

Grid ``(B, N / P, q_blocks, kv_steps)``: each step takes the ``P`` query heads of one GQA group
(``cfg.heads_per_step``) against one key/value block, so the block is loaded once for all of
them and the element mask is built once. The last axis walks key blocks ``lo..hi`` of the
query block (see ``_mask_info``), each in compute sub-blocks of ``block_kv_compute`` keys, and
carries, per head, the running max ``m``, normaliser ``l`` and unnormalised output ``acc`` in
VMEM scratch. ``q`` is scaled once per query block, into VMEM, at the first step: not per score
tile, and not in HBM (a separate pass over q there). Scores are ``q @ k.T`` in the input dtype
with float32 accumulation; the probabilities are cast back to the input dtype for ``p @ v``.
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
from jax.experimental import pallas as pl

from . import _ops
from ._config import FlashConfig
from ._query_block import each_sub_block, head_scores, query_block_step
from ._refs import Refs


def forward_kernel(r: Refs, *, cfg: FlashConfig, block_q: int, block_kv: int, steps: int) -> None:
    """One grid step.

    Refs: prefetch ``lo, hi[, q_min, q_max, kv_min, kv_max]``; inputs ``q (bq, P·Hp)``,
    ``k (bk, Hp)``, ``v (bk, Hvp)``[, ``q_ids (1, bq)``, ``kv_ids (1, bk)``][, ``sinks
    (P, 1, 128)``]; outputs ``o (bq, P·Hvp)``, ``lse (P, 1, bq)``; scratch ``m, l
    (P, bq, 128)``, ``acc (P, bq, Hvp)``, ``q_scaled (bq, P·Hp)``[, ``q_ids_col``].
    """
    heads, hp, hvp = cfg.heads_per_step, cfg.head_dim_padded, cfg.v_head_dim_padded
    at = query_block_step(r, cfg, block_q, block_kv)

    @pl.when(at.j == 0)
    def _init() -> None:
        r.m[...] = jnp.full(r.m.shape, -jnp.inf, jnp.float32)
        r.l[...] = jnp.zeros(r.l.shape, jnp.float32)
        r.acc[...] = jnp.zeros(r.acc.shape, jnp.float32)
        r.q_scaled[...] = _ops.scaled(r.q[...], cfg.scale)
        if cfg.has_segments:
            r.q_ids_col[...] = _ops.row_to_column(r.q_ids[...])

    def sub_block(keys: slice, mask: Any) -> None:
        k = r.k[keys, :]
        v = r.v[keys, :]

        def head(h: Any, cols: Any) -> None:  # P heads against the same k, v and mask
            s, _ = head_scores(r.q_scaled[:, cols], k, mask, cfg)
            m_prev = r.m[h]
            m_next = jnp.maximum(m_prev, jnp.max(s, axis=1, keepdims=True))
            alpha = jnp.exp(m_prev - m_next)
            p = jnp.exp(s - m_next[:, :1])
            r.l[h] = alpha * r.l[h] + jnp.sum(p, axis=1, keepdims=True)
            r.m[h] = m_next
            pv = _ops.dot_nn(p.astype(v.dtype), v)
            r.acc[h] = r.acc[h] * alpha[:, :1] + pv

        _ops.for_each_head(heads, hp, head)

    each_sub_block(r, cfg, at, block_q, block_kv, cfg.blocks.kv_compute, sub_block)

    @pl.when(at.j == steps - 1)
    def _finish() -> None:
        def head(h: Any, cols: Any) -> None:
            m = r.m[h]
            norm = r.l[h]
            empty = m < _ops.EMPTY_BELOW  # rows that saw no key: zeros out, +inf log-sum-exp
            rescale = None
            if cfg.has_sinks:
                # The sink joins the max and the sum once, after the keys (contract 1.3): a
                # term of the denominator with no value.
                sink = r.sinks[h]  # (1, 128), lane-replicated
                m_all = jnp.maximum(m, sink)
                rescale = jnp.exp(m - m_all)
                norm = rescale * norm + jnp.exp(sink - m_all)
                m = m_all
            norm = jnp.where(empty, 1.0, norm)
            inv = jnp.where(empty, 0.0, 1.0 / norm)
            if rescale is not None:
                inv = inv * rescale
            out_cols = _ops.head_columns(h, hvp)
            r.o[:, out_cols] = (r.acc[h] * inv[:, :1]).astype(r.o.dtype)
            r.lse[h] = _ops.column_to_row(jnp.where(empty, jnp.inf, m + jnp.log(norm)))

        _ops.for_each_head(heads, hp, head)
