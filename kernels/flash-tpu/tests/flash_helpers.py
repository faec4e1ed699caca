"""Helpers shared by the tests: random inputs and the contract's ``xla`` kernel as reference."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import zoo_attention


def inputs(
    rng: np.random.Generator,
    b: int,
    t: int,
    s: int,
    n: int,
    k: int,
    h: int,
    dtype: Any = jnp.float32,
) -> tuple[jax.Array, ...]:
    """q ``[B,T,N,H]``, k and v ``[B,S,K,H]`` and a cotangent ``[B,T,N,H]``."""

    def normal(*shape: int) -> jax.Array:
        return jnp.asarray(rng.standard_normal(shape), dtype)

    return normal(b, t, n, h), normal(b, s, k, h), normal(b, s, k, h), normal(b, t, n, h)


def xla_vjp(
    q: jax.Array, k: jax.Array, v: jax.Array, do: jax.Array, **kwargs: Any
) -> tuple[jax.Array, ...]:
    """Output and (dq, dk, dv) of the reference ``xla`` kernel, computed in float64-free float32."""

    def attend(q: jax.Array, k: jax.Array, v: jax.Array) -> jax.Array:
        return zoo_attention.dot_product_attention(q, k, v, implementation="xla", **kwargs)

    out, vjp = jax.vjp(attend, q, k, v)
    return (out, *vjp(do))


def max_error(got: jax.Array, want: jax.Array) -> float:
    """Largest absolute difference, in float64."""
    return float(np.max(np.abs(np.asarray(got, np.float64) - np.asarray(want, np.float64))))


def element_mask(cfg: Any, q_ids: np.ndarray | None, kv_ids: np.ndarray | None) -> np.ndarray:
    """Element mask ``[B, Tp, Sp]`` of a ``FlashConfig`` straight from the contract's words.

    Padding is never visible; ``q_ids``/``kv_ids`` are padded ``[B, Tp]``/``[B, Sp]`` or None.
    """
    i = np.arange(cfg.q_len_padded)[:, None]
    j = np.arange(cfg.kv_len_padded)[None, :]
    m = (i < cfg.q_len) & (j < cfg.kv_len)
    if cfg.causal:
        m &= j <= i
    if cfg.window is not None:
        m &= (j >= i - cfg.window[0]) & (j <= i + cfg.window[1])
    m = np.broadcast_to(m, (cfg.batch, *m.shape)).copy()
    if q_ids is not None:
        m &= q_ids[:, :, None] == kv_ids[:, None, :]
    return m
