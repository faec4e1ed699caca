"""Mask algebra: which (query, key) pairs are visible, for single positions and whole blocks.

The kernels never decide visibility themselves; they call these functions, which work on
Python/NumPy integers (to plan the grid before tracing) and on traced int32 scalars and
vectors (inside a kernel) alike.

Positions are absolute token indices in the padded sequence. Key positions at or past
``kv_len`` are padding and never visible; query padding needs no mask because its outputs are
discarded and its cotangents are zero. Query positions passed in are the block's own (row 0 is
0); the causal and window rules see them shifted by ``cfg.q_offset`` (contract 1.2: the
queries are a block of a longer sequence), here and nowhere else.
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
import numpy as np

from ._config import FlashConfig

Int = Any  # int, numpy array or traced int32


def kv_span(q_first: Int, q_last: Int, cfg: FlashConfig) -> tuple[np.ndarray, np.ndarray]:
    """First and last key position any query in ``[q_first, q_last]`` may see (NumPy).

    The span is empty where ``first > last``. Only causality, the window and the key length
    bound it; segment ids narrow it further from data (see ``_mask_info``).
    """
    q_first, q_last = np.asarray(q_first), np.asarray(q_last)
    first = np.zeros_like(q_first)
    last = np.full_like(q_last, cfg.kv_len - 1)
    # Queries past q_len are padding: a block made only of padding needs no key.
    last = np.where(q_first >= cfg.q_len, -1, last)
    q_first, q_last = q_first + cfg.q_offset, q_last + cfg.q_offset
    if cfg.causal:
        last = np.minimum(last, q_last)
    if cfg.window is not None:
        left, right = cfg.window
        first = np.maximum(first, q_first - left)
        last = np.minimum(last, q_last + right)
    return first, last


def q_span(kv_first: Int, kv_last: Int, cfg: FlashConfig) -> tuple[np.ndarray, np.ndarray]:
    """First and last query position that may see any key in ``[kv_first, kv_last]`` (NumPy)."""
    kv_first, kv_last = np.asarray(kv_first), np.asarray(kv_last)
    first = np.zeros_like(kv_first)
    last = np.full_like(kv_last, cfg.q_len - 1)
    # Keys past kv_len are padding: a block made only of padding is seen by nobody.
    last = np.where(kv_first >= cfg.kv_len, -1, last)
    # Key positions counted from query row 0, so the rules compare like with like.
    shift = cfg.q_offset
    if cfg.causal:
        first = np.maximum(first, kv_first - shift)
    if cfg.window is not None:
        left, right = cfg.window
        first = np.maximum(first, kv_first - right - shift)
        last = np.minimum(last, kv_last + left - shift)
    return first, last


def block_fully_visible(
    q_first: Int, q_last: Int, kv_first: Int, kv_last: Int, cfg: FlashConfig
) -> Any:
    """Whether every pair in the block is visible by position (segments aside).

    True blocks skip the element mask entirely. Works on ints and traced scalars.
    """
    q_first, q_last = q_first + cfg.q_offset, q_last + cfg.q_offset
    full = kv_last < cfg.kv_len
    if cfg.causal:
        full = full & (kv_last <= q_first)
    if cfg.window is not None:
        left, right = cfg.window
        full = full & (kv_first >= q_last - left) & (kv_last <= q_first + right)
    return full


def block_any_visible(
    q_first: Int, q_last: Int, kv_first: Int, kv_last: Int, cfg: FlashConfig
) -> Any:
    """Whether some pair in the block is visible by position (segments aside); exact.

    Over the block, ``key - query`` takes every value in ``[kv_first - q_last,
    kv_last - q_first]``; a pair is visible when that difference lies in the window (and is
    at most 0 when causal) and the key is not padding. Works on ints and traced scalars.
    """
    q_first, q_last = q_first + cfg.q_offset, q_last + cfg.q_offset
    kv_last = jnp.minimum(kv_last, cfg.kv_len - 1)
    seen = kv_first <= kv_last
    upper = 0 if cfg.causal else None
    if cfg.window is not None:
        left, right = cfg.window
        upper = right if upper is None else min(upper, right)
        seen = seen & (kv_last - q_first >= -left)
    if upper is not None:
        seen = seen & (kv_first - q_last <= upper)
    return seen


def segments_overlap(q_min: Int, q_max: Int, kv_min: Int, kv_max: Int) -> Any:
    """Whether a query block and a key block may share a segment id (a safe superset)."""
    return (q_max >= kv_min) & (kv_max >= q_min)


def segments_uniform(q_min: Int, q_max: Int, kv_min: Int, kv_max: Int) -> Any:
    """Whether both blocks hold one and the same segment id, so segments mask nothing."""
    return (q_min == q_max) & (kv_min == kv_max) & (q_min == kv_min)


def visible(
    q_pos: jnp.ndarray,
    kv_pos: jnp.ndarray,
    cfg: FlashConfig,
    q_seg: jnp.ndarray | None = None,
    kv_seg: jnp.ndarray | None = None,
) -> jnp.ndarray:
    """Element mask of a block; the arguments broadcast (a column against a row).

    Same rule as ``zoo_attention.visible`` plus the key-padding bound.
    """
    mask = kv_pos < cfg.kv_len
    q_pos = q_pos + cfg.q_offset
    if cfg.causal:
        mask = mask & (kv_pos <= q_pos)
    if cfg.window is not None:
        left, right = cfg.window
        mask = mask & (kv_pos >= q_pos - left) & (kv_pos <= q_pos + right)
    if q_seg is not None and kv_seg is not None:
        mask = mask & (q_seg == kv_seg)
    return mask
