"""``splash_attention``: the contract's call, in the contract's layout, through JAX's splash.

What the adapter adds to splash:

- layout: the contract's ``[B, T, N, H]`` becomes splash's ``[N, T, H]`` per example, and the
  batch is a ``vmap`` (as MaxText does), which Pallas turns into one more grid axis;
- scale: splash does not scale the logits, so the query is scaled first (in float32, then
  cast back to its dtype);
- grouped-query attention: splash's multi-head kernel takes ``K`` key/value heads for ``N``
  query heads and maps query head ``n`` to key/value head ``n // (N / K)`` in its index maps,
  so K/V are neither repeated nor looped over, and dK/dV are summed over the group inside the
  backward kernel; MQA is the case ``K = 1``;
- rows that see no key: splash leaves such a row at the mean of the masked keys' values (or
  0/0 when its whole block is skipped). An attention sink (a per-head logit added to every
  row's softmax) of ``-1e30`` fixes that inside the kernel: a row with a visible key has a
  maximum far above it, so ``exp(sink - max)`` is exactly 0 and nothing changes; a row with
  none keeps the sink as its maximum, a sum of 1 and an output of 0, and its backward terms
  are 0 as well;
- contract 1.3: the caller's sinks (gpt-oss) take that place, with the same effect on rows
  that see no key and their gradient from splash's own backward; values whose head dim
  differs from the queries' (multi-head latent attention) go to splash as they are.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.experimental.pallas.ops.tpu.splash_attention import (
    BlockSizes,
    SegmentIds,
    make_splash_mha,
)

from ._blocks import choose_block_sizes
from ._mask import multi_head_mask

#: The sink logit that zeroes rows that see no key (finite, and far above splash's mask value
#: of -0.7 * float32 max, so a fully masked row's sum is exactly 1).
EMPTY_ROW_SINK = -1e30


def _check_shapes(query: jax.Array, key: jax.Array, value: jax.Array) -> None:
    if query.ndim != 4 or key.ndim != 4 or value.ndim != 4 or value.shape[:3] != key.shape[:3]:
        raise ValueError(
            f"query must be [B, T, N, H], key [B, S, K, H] and value [B, S, K, Hv], got "
            f"{query.shape}, {key.shape}, {value.shape}."
        )
    n, k = query.shape[2], key.shape[2]
    if k == 0 or n % k:
        raise ValueError(f"query heads N={n} must be a multiple of key/value heads K={k}.")


def splash_attention(
    query: jax.Array,
    key: jax.Array,
    value: jax.Array,
    *,
    scale: float | None = None,
    is_causal: bool = False,
    segment_ids: tuple[jax.Array, jax.Array] | None = None,
    local_window: tuple[int, int] | None = None,
    logits_soft_cap: float | None = None,
    block_sizes: BlockSizes | None = None,
    interpret: bool = False,
    query_offset: int = 0,
    sinks: jax.Array | None = None,
) -> jax.Array:
    """JAX's splash attention on the contract's layout, differentiable.

    Most code calls ``zoo_attention.dot_product_attention(..., implementation="splash")``;
    this entry point adds splash's own knobs.

    Args:
        query: ``[B, T, N, H]`` float32 or bfloat16, T a multiple of 128.
        key: ``[B, S, K, H]``, ``N % K == 0``, S a multiple of 128.
        value: ``[B, S, K, Hv]``; ``Hv`` may differ from ``H``.
        scale: logits multiplier, default ``1 / sqrt(H)``.
        is_causal: query ``i`` sees keys ``j <= i``.
        segment_ids: ``(q_ids [B, T], kv_ids [B, S])`` integers; equal ids attend.
        local_window: ``(left, right)``: query ``i`` sees keys in ``[i - left, i + right]``.
        logits_soft_cap: ``c`` for ``c * tanh(logits / c)``.
        block_sizes: splash's ``BlockSizes``; default :func:`choose_block_sizes`.
        interpret: ``False`` for Mosaic (TPU), ``True`` for Pallas interpret mode on any
            backend.
        query_offset: the position of query row 0 for the causal and window rules (keys
            start at 0): a block of queries of a longer sequence. A Python int, since
            splash builds its block tables from the mask before tracing.
        sinks: ``[N]`` sink logits (each a term of its head's rows' softmax denominator),
            differentiable; ``None`` for none.

    Returns:
        ``[B, T, N, Hv]`` in ``query.dtype``; rows that see no key are zeros.
    """
    _check_shapes(query, key, value)
    _, t, n, h = query.shape
    s = key.shape[1]
    blocks = block_sizes or choose_block_sizes(t, s)
    window = None if local_window is None else (int(local_window[0]), int(local_window[1]))
    kernel = make_splash_mha(
        multi_head_mask(n, t, s, is_causal, window, query_offset),
        block_sizes=blocks,
        head_shards=1,
        q_seq_shards=1,
        attn_logits_soft_cap=logits_soft_cap,
        interpret=interpret,
    )
    scale = h**-0.5 if scale is None else scale
    q = (query.astype(jnp.float32) * scale).astype(query.dtype).transpose(0, 2, 1, 3)
    k, v = key.transpose(0, 2, 1, 3), value.transpose(0, 2, 1, 3)
    if sinks is None:
        sinks = jnp.full((n,), EMPTY_ROW_SINK, jnp.float32)
    elif tuple(sinks.shape) != (n,):
        raise ValueError(f"sinks must be [N] = ({n},), one per query head, got {sinks.shape}.")
    # A row that sees no key keeps a sink as its maximum: its output is 0 whatever the sink.
    head_sinks = sinks.astype(jnp.float32)

    def one_example(
        q: jax.Array, k: jax.Array, v: jax.Array, ids: tuple[jax.Array, jax.Array] | None
    ) -> jax.Array:
        segments = None if ids is None else SegmentIds(q=ids[0], kv=ids[1])
        return kernel(q, k, v, segments, head_sinks)

    with jax.named_scope("zoo_splash.splash_attention"):
        out = jax.vmap(one_example)(q, k, v, segment_ids)
    return out.transpose(0, 2, 1, 3).astype(query.dtype)
