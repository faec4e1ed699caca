"""float64 numpy references for the layers, written from the definitions, not from the code."""

from __future__ import annotations

import math

import numpy as np


def f64(x) -> np.ndarray:
    return np.asarray(x, dtype=np.float64)


def layernorm(x, w, b, eps):
    x = f64(x)
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    out = (x - mu) / np.sqrt(var + eps) * f64(w)
    return out if b is None else out + f64(b)


def rmsnorm(x, w, eps, unit_offset=False):
    x = f64(x)
    scale = 1.0 + f64(w) if unit_offset else f64(w)
    return x / np.sqrt((x**2).mean(-1, keepdims=True) + eps) * scale


def inv_freq(head_dim, theta, kind="none", factor=1.0, low=1.0, high=4.0, original=8192):
    out = []
    for i in range(head_dim // 2):
        f = theta ** (-2.0 * i / head_dim)
        if kind == "linear":
            f = f / factor
        elif kind == "llama3":
            wavelen = 2 * math.pi / f
            if wavelen < original / high:
                pass  # high frequency: unchanged
            elif wavelen > original / low:
                f = f / factor  # low frequency: fully scaled
            else:
                s = (original / wavelen - low) / (high - low)
                f = (1 - s) * f / factor + s * f
        out.append(f)
    return np.array(out)


def yarn_inv_freq(head_dim, theta, factor, original, beta_fast=32.0, beta_slow=1.0, truncate=True):
    """YaRN (Peng et al., 2023): dims that turn more than ``beta_fast`` times over the original
    context keep their frequency, those under ``beta_slow`` times are divided by ``factor``, a
    linear ramp between (over the dims, the bounds floored and ceiled when truncating)."""

    def dim_of(rotations):
        return head_dim * math.log(original / (rotations * 2 * math.pi)) / (2 * math.log(theta))

    low, high = dim_of(beta_fast), dim_of(beta_slow)
    if truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, head_dim - 1)
    out = []
    for i in range(head_dim // 2):
        f = theta ** (-2.0 * i / head_dim)
        ramp = min(max((i - low) / (high - low), 0.0), 1.0)  # 0: keep, 1: interpolate
        out.append(f * (1 - ramp) + f / factor * ramp)
    return np.array(out)


def rope_interleaved(x, positions, freqs):
    """DeepSeek's layout: dims (2i, 2i + 1) form the complex number; the result lists the real
    parts, then the imaginary ones."""
    x = f64(x)
    z = x[..., 0::2] + 1j * x[..., 1::2]
    angle = f64(positions)[:, :, None, None] * f64(freqs)
    z = z * np.exp(1j * angle)
    return np.concatenate([z.real, z.imag], axis=-1)


def rope(x, positions, freqs):
    """x [B, T, N, H], rotate-half layout: dims (i, i + H/2) form the complex number."""
    x = f64(x)
    h = x.shape[-1] // 2
    z = x[..., :h] + 1j * x[..., h:]
    angle = f64(positions)[:, :, None, None] * f64(freqs)
    z = z * np.exp(1j * angle)
    return np.concatenate([z.real, z.imag], axis=-1)


def gelu_tanh(x):
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))


def gelu(x):
    from math import erf

    return 0.5 * x * (1 + np.vectorize(erf)(x / math.sqrt(2)))


def silu(x):
    return x / (1 + np.exp(-x))


ACTS = {"gelu_tanh": gelu_tanh, "gelu": gelu, "silu": silu, "relu": lambda x: np.maximum(x, 0)}


def linear(x, w, b=None):
    y = f64(x) @ f64(w).T
    return y if b is None else y + f64(b)


def attention(q, k, v, *, scale, causal=True, window=None, soft_cap=None, segments=None):
    """q [B, T, N, H], k/v [B, S, K, H]; window W: query i sees keys (i - W, i]."""
    q, k, v = f64(q), f64(k), f64(v)
    b, t, n, _ = q.shape
    s, kh = k.shape[1], k.shape[2]
    k = np.repeat(k, n // kh, axis=2)
    v = np.repeat(v, n // kh, axis=2)
    logits = np.einsum("btnh,bsnh->bnts", q, k) * scale
    if soft_cap is not None:
        logits = soft_cap * np.tanh(logits / soft_cap)
    i = np.arange(t)[:, None]
    j = np.arange(s)[None, :]
    mask = np.ones((b, 1, t, s), bool)
    if causal:
        mask &= j <= i
    if window is not None:
        mask &= j > i - window
    if segments is not None:
        seg = np.asarray(segments)
        mask &= (seg[:, :, None] == seg[:, None, :])[:, None]
    logits = np.where(mask, logits, -np.inf)
    m = logits.max(-1, keepdims=True)
    p = np.exp(logits - m)
    p = p / p.sum(-1, keepdims=True)
    return np.einsum("bnts,bsnh->btnh", p, v)
