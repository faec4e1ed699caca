"""Where a query-major grid step is: its key block, whether it computes, and its element mask.

The forward and dQ kernels share the grid ``(B, N / P, q_blocks, kv_steps)``: step ``j`` of
query block ``i`` visits key block ``lo + j`` of that block's prefetched range ``[lo, hi]``.
A key block loaded at once (the DMA block) is computed in sub-blocks of
``block_kv_compute`` keys (:func:`each_sub_block`), so the float32 tiles stay small.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import jax.numpy as jnp
from jax.experimental import pallas as pl

from . import _ops
from ._config import FlashConfig
from ._mask import (
    block_any_visible,
    block_fully_visible,
    segments_overlap,
    segments_uniform,
    visible,
)
from ._refs import Refs


@dataclasses.dataclass(frozen=True)
class QueryBlockStep:
    """One grid step of a query-major kernel (all values traced int32 / bool scalars).

    Attributes:
        j: the step along the key axis.
        q_first: first query position of the block.
        kv_first: first key position of the visited key block.
        active: the block holds at least one visible pair (else the step does nothing).
        full: every pair in the block is visible (no element mask needed).
    """

    j: Any
    q_first: Any
    kv_first: Any
    active: Any
    full: Any


def query_block_step(r: Refs, cfg: FlashConfig, block_q: int, block_kv: int) -> QueryBlockStep:
    """Read the step from the program ids and the prefetched ranges (lo, hi[, segment min/max])."""
    b, _, i, j = (pl.program_id(a) for a in range(4))
    nq = pl.num_programs(2)
    nk = cfg.kv_len_padded // block_kv
    row = b * nq + i
    jb = r.lo[row] + j
    active = jb <= r.hi[row]
    q_first = i * block_q
    kv_first = jb * block_kv
    full = block_fully_visible(
        q_first, q_first + block_q - 1, kv_first, kv_first + block_kv - 1, cfg
    )
    if cfg.has_segments:
        q_min, q_max = r.q_min[row], r.q_max[row]
        col = b * nk + jnp.minimum(jb, nk - 1)
        kv_min, kv_max = r.kv_min[col], r.kv_max[col]
        active = active & segments_overlap(q_min, q_max, kv_min, kv_max)
        full = full & segments_uniform(q_min, q_max, kv_min, kv_max)
    return QueryBlockStep(j, q_first, kv_first, active, full)


def step_mask(
    r: Refs, cfg: FlashConfig, at: QueryBlockStep, block_q: int, start: int, size: int
) -> Any:
    """The ``(bq, size)`` visibility of keys ``start..start+size`` of a partially visible key
    block, shared by the step's heads."""
    shape = (block_q, size)
    seg = cfg.has_segments
    return visible(
        _ops.positions(at.q_first, shape, 0),
        _ops.positions(at.kv_first + start, shape, 1),
        cfg,
        r.q_ids_col[:, :1] if seg else None,
        r.kv_ids[:, start : start + size] if seg else None,
    )


#: ``body(keys, mask)``: compute against rows ``keys`` of the step's key block, with the
#: element mask of those keys (``None`` when every pair is visible).
SubBlockBody = Callable[[slice, Any], None]


def each_sub_block(
    r: Refs,
    cfg: FlashConfig,
    at: QueryBlockStep,
    block_q: int,
    block_kv: int,
    block_compute: int,
    body: SubBlockBody,
) -> None:
    """Run ``body`` over the compute sub-blocks of an active step's key block.

    A fully visible block runs every sub-block unmasked. A partially visible one runs, masked,
    only the sub-blocks that hold a visible pair by position (on the causal diagonal of a
    1024-key block, often one of two); segment ids are left to the mask there. The sub-blocks
    are unrolled with static offsets: Mosaic slices the loaded block at aligned constants.
    """
    starts = range(0, block_kv, block_compute)

    def full() -> None:
        for start in starts:
            body(slice(start, start + block_compute), None)

    def partial() -> None:
        q_last = at.q_first + block_q - 1
        for start in starts:
            keys = slice(start, start + block_compute)
            if len(starts) == 1:  # the block's own range check already said it is seen
                body(keys, step_mask(r, cfg, at, block_q, start, block_compute))
                continue
            first = at.kv_first + start
            seen = block_any_visible(at.q_first, q_last, first, first + block_compute - 1, cfg)

            # Bind this sub-block's offsets now: pl.when calls the body while tracing.
            def masked(keys: slice = keys, start: int = start) -> None:
                body(keys, step_mask(r, cfg, at, block_q, start, block_compute))

            pl.when(seen)(masked)

    pl.when(at.active & at.full)(full)
    pl.when(at.active & jnp.logical_not(at.full))(partial)


def head_scores(q: Any, k: Any, mask: Any, cfg: FlashConfig) -> tuple[Any, Any]:
    """``q kᵀ`` of one head (q already scaled), soft-capped and masked, and the cap's tanh."""
    s = _ops.dot_nt(q, k)
    s, tanh = _ops.soft_cap(s, cfg.soft_cap)
    if mask is not None:
        s = jnp.where(mask, s, _ops.MASK_VALUE)
    return s, tanh
