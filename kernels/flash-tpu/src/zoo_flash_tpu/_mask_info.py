"""Mask info: per-block key (or query) ranges that drive the grid, from the mask algebra and data.

For each query block the forward and dq kernels visit only the key blocks ``lo..hi`` of its
row; the grid's inner axis has the static length ``steps`` (the widest row), and the index
maps clamp ``lo + step`` into ``[lo, hi]`` so steps past the end re-use the block already in
VMEM: no DMA, and the kernel's ``step <= hi - lo`` test skips the matmuls. The dk/dv kernel does
the same with the roles of queries and keys swapped.

Causality, the window and padding give the ranges before tracing. Segment ids narrow them
from data: each block's min/max id is computed here, blocks whose id ranges do not overlap are
cut from the ends of a row, and the kernels re-check the overlap block by block. Blocks with
no shared segment can also lie inside a row (ids that are not sorted, such as interleaved
sequences); a per-step fetch table (``BlockRanges.fetch``) sends such a step to the next block
that computes, so they are never loaded either.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from ._config import FlashConfig
from ._mask import kv_span, q_span, segments_overlap


@dataclasses.dataclass(frozen=True)
class SegmentBounds:
    """Min and max segment id of every query block and key block, flattened ``[B * blocks]``."""

    q_min: jax.Array
    q_max: jax.Array
    kv_min: jax.Array
    kv_max: jax.Array


@dataclasses.dataclass(frozen=True)
class BlockRanges:
    """For every (batch, outer block): the inner blocks ``lo..hi`` to visit, flattened.

    Attributes:
        lo, hi: int32 ``[B * outer_blocks]``; a row with ``hi < lo`` visits nothing.
        steps: static extent of the grid's inner axis (at least 1).
        fetch: int32 ``[B * outer_blocks * steps]``, the block step ``s`` of row ``r`` loads,
            at ``r * steps + s``; ``None`` without segment ids (then ``lo + s`` clamped into
            ``[lo, max(hi, lo)]``), or when the table would exceed :data:`FETCH_TABLE_BYTES`.
    """

    lo: jax.Array
    hi: jax.Array
    steps: int
    fetch: jax.Array | None = None


#: Largest fetch table kept in SMEM (1 MiB on v4 to v6e, shared with the other prefetched
#: ranges). Longer sequences with segment ids load blocks of a row that compute nothing
#: (still never computing them), as without a table.
FETCH_TABLE_BYTES = 256 * 1024


def segment_bounds(
    q_ids: jax.Array, kv_ids: jax.Array, block_q: int, block_kv: int
) -> SegmentBounds:
    """Per-block min/max of padded segment ids ``[B, Tp]`` and ``[B, Sp]``."""
    b = q_ids.shape[0]
    q_blocks = q_ids.reshape(b, -1, block_q)
    kv_blocks = kv_ids.reshape(b, -1, block_kv)
    return SegmentBounds(
        q_min=q_blocks.min(-1).reshape(-1),
        q_max=q_blocks.max(-1).reshape(-1),
        kv_min=kv_blocks.min(-1).reshape(-1),
        kv_max=kv_blocks.max(-1).reshape(-1),
    )


def _static_rows(
    first: np.ndarray, last: np.ndarray, block: int, n_inner: int
) -> tuple[np.ndarray, np.ndarray]:
    lo = np.clip(first, 0, None) // block
    hi = np.minimum(last // block, n_inner - 1)
    empty = first > last
    return np.where(empty, 0, lo).astype(np.int32), np.where(empty, -1, hi).astype(np.int32)


def _narrow(lo: np.ndarray, hi: np.ndarray, overlap: jax.Array, steps: int) -> BlockRanges:
    """Cut inner blocks with no shared segment from both ends of each row (``overlap [B, O, I]``),
    and tabulate what each step loads."""
    n_inner = overlap.shape[-1]
    inner = np.arange(n_inner)
    band = (inner[None, :] >= lo[:, None]) & (inner[None, :] <= hi[:, None])
    live = overlap & band[None]
    any_live = live.any(-1)
    first = jnp.argmax(live, axis=-1)
    last = n_inner - 1 - jnp.argmax(live[..., ::-1], axis=-1)
    lo_d = jnp.where(any_live, first, 0).astype(jnp.int32)
    hi_d = jnp.where(any_live, last, -1).astype(jnp.int32)
    fetch = None
    if live.size // n_inner * steps * 4 <= FETCH_TABLE_BYTES:
        fetch = _fetch_table(live, lo_d, hi_d, steps).reshape(-1)
    return BlockRanges(lo_d.reshape(-1), hi_d.reshape(-1), steps, fetch)


def _fetch_table(live: jax.Array, lo: jax.Array, hi: jax.Array, steps: int) -> jax.Array:
    """``[B, O, steps]``: the block each step loads.

    A step that computes loads its own block ``lo + s``. A step on a block that shares no
    segment loads the next block of the row that computes (fetched early, so the step that
    computes it loads nothing), and steps past the last one keep the last: consecutive steps
    then name the same block and Pallas issues no copy between them.
    """
    n_inner = live.shape[-1]
    inner = jnp.arange(n_inner, dtype=jnp.int32)
    # Smallest live block at or after each block (n_inner where none is).
    next_live = jax.lax.cummin(jnp.where(live, inner, n_inner), axis=live.ndim - 1, reverse=True)
    block = jnp.minimum(lo[..., None] + jnp.arange(steps, dtype=jnp.int32), n_inner - 1)
    ahead = jnp.take_along_axis(next_live, block, axis=-1)
    return jnp.where(ahead < n_inner, ahead, jnp.maximum(hi, lo)[..., None]).astype(jnp.int32)


def _steps(lo: np.ndarray, hi: np.ndarray) -> int:
    return max(1, int(np.max(hi - lo + 1, initial=0)))


def _ranges(
    lo: np.ndarray,
    hi: np.ndarray,
    cfg: FlashConfig,
    seg: SegmentBounds | None,
    shapes: tuple[tuple[int, ...], tuple[int, ...]],
) -> BlockRanges:
    """Static per-block ranges, narrowed per batch row by segment overlap when ids are given.

    ``shapes`` are the broadcast shapes of the query and key segment bounds, which put the
    iterated axis (rows of ``lo``/``hi``) second and the visited axis last.
    """
    steps = _steps(lo, hi)
    if seg is None:
        return BlockRanges(
            jnp.asarray(np.tile(lo, cfg.batch)), jnp.asarray(np.tile(hi, cfg.batch)), steps
        )
    q_shape, kv_shape = shapes
    overlap = segments_overlap(
        seg.q_min.reshape(q_shape),
        seg.q_max.reshape(q_shape),
        seg.kv_min.reshape(kv_shape),
        seg.kv_max.reshape(kv_shape),
    )
    return _narrow(lo, hi, overlap, steps)


def kv_ranges(
    cfg: FlashConfig, block_q: int, block_kv: int, seg: SegmentBounds | None
) -> BlockRanges:
    """Key blocks each query block visits (forward and dq kernels)."""
    nq = cfg.q_len_padded // block_q
    nk = cfg.kv_len_padded // block_kv
    q_first = np.arange(nq) * block_q
    q_last = np.minimum(q_first + block_q - 1, cfg.q_len - 1)
    lo, hi = _static_rows(*kv_span(q_first, q_last, cfg), block_kv, nk)
    b = cfg.batch
    return _ranges(lo, hi, cfg, seg, ((b, nq, 1), (b, 1, nk)))


def q_ranges(
    cfg: FlashConfig, block_q: int, block_kv: int, seg: SegmentBounds | None
) -> BlockRanges:
    """Query blocks each key block is seen by (dk/dv kernel)."""
    nq = cfg.q_len_padded // block_q
    nk = cfg.kv_len_padded // block_kv
    kv_first = np.arange(nk) * block_kv
    kv_last = np.minimum(kv_first + block_kv - 1, cfg.kv_len - 1)
    lo, hi = _static_rows(*q_span(kv_first, kv_last, cfg), block_q, nq)
    b = cfg.batch
    return _ranges(lo, hi, cfg, seg, ((b, 1, nq), (b, nk, 1)))


def visited_blocks(cfg: FlashConfig, block_q: int, block_kv: int) -> int:
    """(query block, key block) pairs per (batch, head) the position structure leaves to compute.

    Used by the cost estimates; segment ids can only lower it.
    """
    nq = cfg.q_len_padded // block_q
    nk = cfg.kv_len_padded // block_kv
    q_first = np.arange(nq) * block_q
    q_last = np.minimum(q_first + block_q - 1, cfg.q_len - 1)
    lo, hi = _static_rows(*kv_span(q_first, q_last, cfg), block_kv, nk)
    return int(np.sum(np.maximum(hi - lo + 1, 0)))
