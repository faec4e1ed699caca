"""Float64 numpy linear cross entropy with hand-written gradients: the independent reference."""

from __future__ import annotations

import dataclasses

import numpy as np


@dataclasses.dataclass(frozen=True)
class CrossEntropyReference:
    """Outputs and, when cotangents were given, the gradients (all float64)."""

    ce: np.ndarray  # [N]
    log_z: np.ndarray  # [N]
    d_hidden: np.ndarray | None = None  # [N, D]
    d_head: np.ndarray | None = None  # the head's layout


def reference_cross_entropy(
    hidden: np.ndarray,
    head: np.ndarray,
    targets: np.ndarray,
    counts: np.ndarray,
    *,
    head_layout: str = "dv",
    soft_cap: float | None = None,
    temperature: float = 1.0,
    g_ce: np.ndarray | None = None,
    g_log_z: np.ndarray | None = None,
) -> CrossEntropyReference:
    """``ce`` and ``log_z`` of ``hidden [N, D]`` against ``head`` (``[D, V]`` or ``[V, D]``),
    zero where ``counts [N]`` is false; with cotangents ``g_ce`` and ``g_log_z`` ``[N]``, the
    gradients: ``d logits = softmax (g_ce + g_log_z) - onehot g_ce``, over ``temperature``,
    times ``1 - (capped / c)^2`` under a soft cap ``c``, zero for tokens that do not count
    (``logits = capped / temperature``, ``capped = c tanh(hidden @ head / c)``)."""
    h = np.asarray(hidden, np.float64)
    w = np.asarray(head, np.float64)
    w_dv = w if head_layout == "dv" else w.T
    raw = h @ w_dv
    capped = raw if soft_cap is None else soft_cap * np.tanh(raw / soft_cap)
    logits = capped / temperature
    top = logits.max(axis=-1, keepdims=True)
    log_z = (top + np.log(np.exp(logits - top).sum(axis=-1, keepdims=True)))[:, 0]
    safe = np.where(counts, targets, 0)
    target_logit = np.take_along_axis(logits, safe[:, None], axis=-1)[:, 0]
    ce = np.where(counts, log_z - target_logit, 0.0)
    lz = np.where(counts, log_z, 0.0)
    if g_ce is None or g_log_z is None:
        return CrossEntropyReference(ce, lz)
    probs = np.exp(logits - log_z[:, None])
    onehot = np.zeros_like(logits)
    onehot[np.arange(len(safe)), safe] = 1.0
    gc, gz = np.asarray(g_ce, np.float64), np.asarray(g_log_z, np.float64)
    d = probs * (gc + gz)[:, None] - onehot * gc[:, None]
    d = d / temperature
    if soft_cap is not None:
        d = d * (1.0 - (capped / soft_cap) ** 2)
    d = np.where(counts[:, None], d, 0.0)
    d_hidden = d @ w_dv.T
    d_dv = h.T @ d
    return CrossEntropyReference(ce, lz, d_hidden, d_dv if head_layout == "dv" else d_dv.T)
