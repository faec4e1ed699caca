"""The gated delta rule in float64 numpy, token by token, with its backward pass written out
by hand: the independent reference of the linear-attention conformance suite."""

from __future__ import annotations

import dataclasses

import numpy as np

from .._prepare import L2_EPS


@dataclasses.dataclass(frozen=True)
class LinearReference:
    """Output, final state and, when cotangents were given, the gradients (all float64).

    ``grads`` maps ``query``, ``key``, ``value``, ``log_decay``, ``beta`` and ``initial_state``
    to the gradient of ``sum(out * d_out) + sum(final_state * d_state)`` with respect to it.
    """

    out: np.ndarray  # [B, T, N, Dv]
    final_state: np.ndarray  # [B, N, Dk, Dv]
    grads: dict[str, np.ndarray] | None = None


def _normalized(x: np.ndarray, normalize: bool) -> tuple[np.ndarray, np.ndarray]:
    if not normalize:
        return x, np.ones((*x.shape[:-1], 1))
    norm = np.sqrt(np.sum(x * x, axis=-1, keepdims=True) + L2_EPS)
    return x / norm, norm


def _normalized_grad(
    y: np.ndarray, norm: np.ndarray, dy: np.ndarray, normalize: bool
) -> np.ndarray:
    # y = x / sqrt(|x|^2 + eps)  =>  dx = (dy - y (y . dy)) / norm
    if not normalize:
        return dy
    return (dy - y * np.sum(y * dy, axis=-1, keepdims=True)) / norm


def document_starts(segment_ids: np.ndarray | None, batch: int, seq_len: int) -> np.ndarray:
    """bool ``[B, T]``: where a document starts after the first token."""
    starts = np.zeros((batch, seq_len), bool)
    if segment_ids is not None:
        starts[:, 1:] = segment_ids[:, 1:] != segment_ids[:, :-1]
    return starts


def reference_gated_delta_rule(
    query: np.ndarray,
    key: np.ndarray,
    value: np.ndarray,
    log_decay: np.ndarray,
    beta: np.ndarray,
    *,
    scale: float | None = None,
    normalize_qk: bool = False,
    segment_ids: np.ndarray | None = None,
    initial_state: np.ndarray | None = None,
    d_out: np.ndarray | None = None,
    d_state: np.ndarray | None = None,
) -> LinearReference:
    """The rule of :func:`zoo_attention.linear.gated_delta_rule` in float64; with ``d_out``
    (and optionally ``d_state``) the gradients too, by the recurrence run backwards."""
    q0, k0, v = (np.asarray(x, np.float64) for x in (query, key, value))
    g, bt = np.asarray(log_decay, np.float64), np.asarray(beta, np.float64)
    b, t, heads, dk = q0.shape
    n, dv = v.shape[2:]
    group = n // heads
    scale = dk**-0.5 if scale is None else float(scale)
    qn, q_norm = _normalized(q0, normalize_qk)
    kn, k_norm = _normalized(k0, normalize_qk)
    q = np.repeat(qn * scale, group, axis=2)
    k = np.repeat(kn, group, axis=2)
    keep = 1.0 - document_starts(segment_ids, b, t)[..., None]  # [B, T, 1]
    state = np.zeros((b, n, dk, dv))
    if initial_state is not None:
        state = np.asarray(initial_state, np.float64).copy()
    out = np.zeros((b, t, n, dv))
    saved = []
    for i in range(t):
        a = np.exp(g[:, i]) * keep[:, i]  # [B, N]
        decayed = a[..., None, None] * state
        read = np.einsum("bnkv,bnk->bnv", decayed, k[:, i])
        delta = bt[:, i, :, None] * (v[:, i] - read)
        new = decayed + np.einsum("bnk,bnv->bnkv", k[:, i], delta)
        out[:, i] = np.einsum("bnkv,bnk->bnv", new, q[:, i])
        saved.append((state, a, decayed, read, delta, new))
        state = new
    if d_out is None:
        return LinearReference(out, state)

    do = np.asarray(d_out, np.float64)
    ds = np.zeros_like(state) if d_state is None else np.asarray(d_state, np.float64).copy()
    dq, dk_, dv_ = np.zeros_like(q), np.zeros_like(k), np.zeros_like(v)
    dg, dbeta = np.zeros_like(g), np.zeros_like(bt)
    for i in reversed(range(t)):
        before, a, decayed, read, delta, new = saved[i]
        # o = S^T q
        ds = ds + np.einsum("bnk,bnv->bnkv", q[:, i], do[:, i])
        dq[:, i] = np.einsum("bnkv,bnv->bnk", new, do[:, i])
        # S = S' + k delta^T
        dk_[:, i] = np.einsum("bnkv,bnv->bnk", ds, delta)
        d_delta = np.einsum("bnkv,bnk->bnv", ds, k[:, i])
        # delta = beta (v - S'^T k)
        dv_[:, i] = bt[:, i, :, None] * d_delta
        dbeta[:, i] = np.sum(d_delta * (v[:, i] - read), axis=-1)
        d_read = -bt[:, i, :, None] * d_delta
        d_decayed = ds + np.einsum("bnk,bnv->bnkv", k[:, i], d_read)
        dk_[:, i] += np.einsum("bnkv,bnv->bnk", decayed, d_read)
        # S' = a S, a = exp(g) (0 at a document start)
        dg[:, i] = np.sum(d_decayed * before, axis=(-2, -1)) * a
        ds = a[..., None, None] * d_decayed

    def heads_of(x: np.ndarray) -> np.ndarray:  # the repeat's transpose: sum each group
        return x.reshape(b, t, heads, group, dk).sum(axis=3)

    grads = {
        "query": _normalized_grad(qn, q_norm, heads_of(dq) * scale, normalize_qk),
        "key": _normalized_grad(kn, k_norm, heads_of(dk_), normalize_qk),
        "value": dv_,
        "log_decay": dg,
        "beta": dbeta,
        "initial_state": ds,
    }
    return LinearReference(out, state, grads)
