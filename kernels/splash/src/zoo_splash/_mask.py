"""The static mask splash is given: causal and local windows as lazy masks, built once.

Splash reads a mask per head and turns it into block tables (which blocks to skip, which to
mask) with numpy while the call is traced. A dense ``NumpyMask`` would be a ``[T, S]`` array;
``CausalMask`` and ``LocalMask`` are computed from indices instead (inside the kernel too), so
memory stays O(T). The objects are cached, so retracing a model reuses them, and splash's own
cache of block tables (keyed by mask equality) finds them. Segment ids are data, not part of
the mask: splash applies them in the kernel.
"""

from __future__ import annotations

import functools

from jax.experimental.pallas.ops.tpu.splash_attention import (
    CausalMask,
    FullMask,
    LocalMask,
    Mask,
    MultiHeadMask,
)


@functools.lru_cache(maxsize=64)
def head_mask(
    q_len: int,
    kv_len: int,
    is_causal: bool,
    window: tuple[int, int] | None,
    query_offset: int = 0,
) -> Mask:
    """The ``[q_len, kv_len]`` mask of one head, in the contract's words.

    Top-left aligned: query ``i`` (at position ``p = i + query_offset``) sees key ``j`` when
    ``j <= p`` (causal) and ``p - left <= j <= p + right`` (window). Causal with a window is
    the window ``(left, 0)``. Splash's own ``offset`` is that shift of the query rows.
    """
    shape = (q_len, kv_len)
    if window is not None:
        left, right = window
        return LocalMask(shape, window_size=(left, 0 if is_causal else right), offset=query_offset)
    if is_causal:
        return CausalMask(shape, offset=query_offset)
    return FullMask(shape)


@functools.lru_cache(maxsize=64)
def multi_head_mask(
    num_heads: int,
    q_len: int,
    kv_len: int,
    is_causal: bool,
    window: tuple[int, int] | None,
    query_offset: int = 0,
) -> MultiHeadMask:
    """The same :func:`head_mask` for each of ``num_heads`` query heads (splash stores the
    block tables of identical heads once)."""
    return MultiHeadMask([head_mask(q_len, kv_len, is_causal, window, query_offset)] * num_heads)
