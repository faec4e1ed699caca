"""Float64 numpy attention: the independent reference every kernel is checked against.

Forward and backward are written out by hand (no autodiff) so the reference shares no code
with any kernel, the ``xla`` kernel included.
"""

from __future__ import annotations

import dataclasses

import numpy as np


@dataclasses.dataclass(frozen=True)
class ReferenceResult:
    """Output and, when a cotangent was given, the gradients (all float64)."""

    out: np.ndarray  # [B, T, N, Hv]
    dq: np.ndarray | None = None  # [B, T, N, H]
    dk: np.ndarray | None = None  # [B, S, K, H]
    dv: np.ndarray | None = None  # [B, S, K, Hv]
    row_sees_key: np.ndarray | None = None  # bool [B, N, T]
    dsinks: np.ndarray | None = None  # [N], when sinks and a cotangent were given


def reference_mask(
    batch: int,
    q_len: int,
    kv_len: int,
    *,
    is_causal: bool = False,
    segment_ids: tuple[np.ndarray, np.ndarray] | None = None,
    local_window: tuple[int, int] | None = None,
) -> np.ndarray:
    """Boolean ``[B, T, S]``: may query ``i`` see key ``j``, straight from the contract's words."""
    i = np.arange(q_len)[:, None]
    j = np.arange(kv_len)[None, :]
    mask = np.ones((batch, q_len, kv_len), dtype=bool)
    if is_causal:
        mask &= (j <= i)[None]
    if local_window is not None:
        left, right = local_window
        mask &= ((j >= i - left) & (j <= i + right))[None]
    if segment_ids is not None:
        q_ids, kv_ids = (np.asarray(x) for x in segment_ids)
        mask &= q_ids[:, :, None] == kv_ids[:, None, :]
    return mask


def reference_attention(
    query: np.ndarray,
    key: np.ndarray,
    value: np.ndarray,
    *,
    scale: float | None = None,
    is_causal: bool = False,
    segment_ids: np.ndarray | tuple[np.ndarray, np.ndarray] | None = None,
    local_window_size: int | tuple[int, int] | None = None,
    logits_soft_cap: float | None = None,
    sinks: np.ndarray | None = None,
    cotangent: np.ndarray | None = None,
) -> ReferenceResult:
    """Attention in float64 numpy, with hand-written gradients when ``cotangent`` is given.

    Args:
        query: ``[B, T, N, H]``; key: ``[B, S, K, H]``; value: ``[B, S, K, Hv]``; arguments
            as in ``zoo_attention.dot_product_attention``.
        sinks: ``[N]``: each query head's sink logit, one more term of every row's softmax
            denominator (contract 1.3).
        cotangent: ``[B, T, N, Hv]`` upstream gradient of the output.
    """
    q, k, v = (np.asarray(x, dtype=np.float64) for x in (query, key, value))
    b, t, n, h = q.shape
    hv = v.shape[-1]
    s, kh = k.shape[1], k.shape[2]
    g = n // kh
    scale = 1.0 / np.sqrt(h) if scale is None else scale
    if segment_ids is not None and not isinstance(segment_ids, tuple | list):
        segment_ids = (segment_ids, segment_ids)
    if isinstance(local_window_size, int):
        local_window_size = (local_window_size, local_window_size)
    mask = reference_mask(
        b, t, s, is_causal=is_causal, segment_ids=segment_ids, local_window=local_window_size
    )[:, None]  # [B, 1, T, S]
    # Query head n reads key/value head n // g.
    k_full = np.repeat(k, g, axis=2)
    v_full = np.repeat(v, g, axis=2)
    raw = np.einsum("btnh,bsnh->bnts", q, k_full) * scale
    if logits_soft_cap is not None:
        tanh = np.tanh(raw / logits_soft_cap)
        logits = logits_soft_cap * tanh
    else:
        logits = raw
    sees = mask.any(axis=-1)  # [B, 1, T]
    masked = np.where(mask, logits, -np.inf)
    row_max = np.where(sees, masked.max(axis=-1), 0.0)  # [B, N, T]
    sink = None
    if sinks is not None:
        sink = np.asarray(sinks, dtype=np.float64)[None, :, None]  # [1, N, 1]
        row_max = np.maximum(np.where(sees, row_max, -np.inf), sink)
    weights = np.where(mask, np.exp(masked - row_max[..., None]), 0.0)
    denom = weights.sum(axis=-1, keepdims=True)
    if sink is not None:
        sink_weight = np.exp(sink - row_max)[..., None]  # [B, N, T, 1]
        denom = denom + sink_weight
    probs = weights / np.where(denom == 0, 1.0, denom)  # [B, N, T, S]
    out = np.einsum("bnts,bsnh->btnh", probs, v_full)
    row_sees_key = np.broadcast_to(sees, (b, n, t))
    if cotangent is None:
        return ReferenceResult(out=out, row_sees_key=row_sees_key)

    do = np.asarray(cotangent, dtype=np.float64)
    dv_full = np.einsum("bnts,btnh->bsnh", probs, do)
    dprobs = np.einsum("btnh,bsnh->bnts", do, v_full)
    # The sink's own column has no value, so its dprob is 0: the rows' sums are unchanged, and
    # d sink = p_sink * (0 - sum_j p_j dprob_j), summed over the rows of its head.
    row_dot = (dprobs * probs).sum(axis=-1, keepdims=True)
    dlogits = probs * (dprobs - row_dot)
    dsinks = None
    if sink is not None:
        p_sink = sink_weight / denom
        dsinks = -(p_sink * row_dot).sum(axis=(0, 2, 3))
    if logits_soft_cap is not None:
        dlogits = dlogits * (1.0 - tanh**2)
    draw = dlogits * scale
    dq = np.einsum("bnts,bsnh->btnh", draw, k_full)
    dk_full = np.einsum("bnts,btnh->bsnh", draw, q)
    # Sum the gradients of the g query heads that share each key/value head.
    dk = dk_full.reshape(b, s, kh, g, h).sum(axis=3)
    dv = dv_full.reshape(b, s, kh, g, hv).sum(axis=3)
    return ReferenceResult(out=out, dq=dq, dk=dk, dv=dv, row_sees_key=row_sees_key, dsinks=dsinks)
