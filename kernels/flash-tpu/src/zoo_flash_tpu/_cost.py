"""``pl.CostEstimate`` for each kernel, so XLA's scheduler and profiles see real FLOPs and bytes.

FLOPs count the MXU work of the blocks the position structure leaves (skipped blocks cost
nothing), at the padded head dim the MXU actually runs. Bytes count what the grid moves
between HBM and VMEM: each query-side block once, each key-side block once per visit. In the
forward and dQ kernels a visit serves ``heads_per_step`` query heads of a group, so key/value
traffic is ``B · (N / P) · visited blocks · 2 · bk · Hp · itemsize``
(:func:`forward_kv_bytes`).
"""

from __future__ import annotations

from jax.experimental import pallas as pl

from ._config import FlashConfig
from ._mask_info import visited_blocks


def _common(cfg: FlashConfig, block_q: int, block_kv: int) -> tuple[int, int, int]:
    pairs = visited_blocks(cfg, block_q, block_kv) * cfg.batch * cfg.num_heads
    elements = pairs * block_q * block_kv  # scores computed
    q_side = cfg.batch * cfg.q_len_padded * cfg.num_heads * cfg.head_dim_padded * cfg.itemsize
    return pairs, elements, q_side


def kv_visit_bytes(cfg: FlashConfig, block_q: int, block_kv: int) -> int:
    """HBM bytes of key and value blocks a query-major kernel fetches (forward or dQ).

    Each visited (query block, key block) pair fetches one ``k`` and one ``v`` block once per
    grid step of ``heads_per_step`` query heads. Steps past a row's range re-use the block in
    VMEM and fetch nothing.
    """
    visits = visited_blocks(cfg, block_q, block_kv) * cfg.batch * cfg.head_steps
    return visits * 2 * block_kv * cfg.head_dim_padded * cfg.itemsize


def forward_kv_bytes(cfg: FlashConfig) -> int:
    """Modelled key/value HBM traffic of one forward call (see :func:`kv_visit_bytes`)."""
    return kv_visit_bytes(cfg, cfg.blocks.block_q, cfg.blocks.block_kv)


def forward_cost(cfg: FlashConfig) -> pl.CostEstimate:
    """Forward: ``s = q k^T`` and ``p v`` (4·bq·bk·H FLOPs per block), one exp per score."""
    bq, bk = cfg.blocks.block_q, cfg.blocks.block_kv
    _, elements, q_side = _common(cfg, bq, bk)
    h = cfg.head_dim_padded
    transcendentals = elements * (2 if cfg.soft_cap is not None else 1)
    kv_bytes = forward_kv_bytes(cfg)
    lse_bytes = cfg.batch * cfg.num_heads * cfg.q_len_padded * 4
    return pl.CostEstimate(
        flops=4 * elements * h,
        transcendentals=transcendentals,
        bytes_accessed=2 * q_side + kv_bytes + lse_bytes,
    )


def dq_cost(cfg: FlashConfig) -> pl.CostEstimate:
    """dQ: ``s``, ``dO v^T`` and ``ds k`` (6·bq·bk·H FLOPs per block)."""
    bq, bk = cfg.blocks.block_q_bwd, cfg.blocks.block_kv_bwd
    _, elements, q_side = _common(cfg, bq, bk)
    h = cfg.head_dim_padded
    transcendentals = elements * (2 if cfg.soft_cap is not None else 1)
    kv_bytes = kv_visit_bytes(cfg, bq, bk)
    rows = 2 * cfg.batch * cfg.num_heads * cfg.q_len_padded * 4
    return pl.CostEstimate(
        flops=6 * elements * h,
        transcendentals=transcendentals,
        bytes_accessed=3 * q_side + kv_bytes + rows,
    )


def dkdv_cost(cfg: FlashConfig) -> pl.CostEstimate:
    """dK/dV: ``s``, ``p^T dO``, ``v dO^T`` and ``ds^T q`` (8·bq·bk·H FLOPs per block)."""
    bq, bk = cfg.blocks.block_q_bwd, cfg.blocks.block_kv_bwd
    pairs, elements, _ = _common(cfg, bq, bk)
    h = cfg.head_dim_padded
    transcendentals = elements * (2 if cfg.soft_cap is not None else 1)
    q_visits = pairs * (2 * bq * h * cfg.itemsize + 2 * bq * 4)  # q, dO, lse, delta per visit
    kv_side = (
        4 * cfg.batch * cfg.kv_len_padded * cfg.num_kv_heads * h * cfg.itemsize
    )  # k, v in; dk, dv out
    return pl.CostEstimate(
        flops=8 * elements * h,
        transcendentals=transcendentals,
        bytes_accessed=q_visits + kv_side,
    )
