"""In-kernel building blocks shared by the three kernel bodies."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl

from ._policy import LANES

# Finite "minus infinity" for masked logits: a row whose scores are all masked keeps a finite
# running max, so the online-softmax rescale exp(m_prev - m_next) never sees inf - inf.
MASK_VALUE = -0.7 * float(jnp.finfo(jnp.float32).max)
# A running max below this means the row has seen no visible key.
EMPTY_BELOW = 0.5 * MASK_VALUE


def _precision(x: jax.Array) -> lax.Precision:
    # float32 inputs get full-precision MXU passes; bfloat16 is exact in one pass.
    return lax.Precision.HIGHEST if x.dtype == jnp.float32 else lax.Precision.DEFAULT


def dot_nt(a: jax.Array, b: jax.Array) -> jax.Array:
    """``a @ b.T`` on the MXU in the input dtype, float32 accumulation: ``[m, d] x [n, d] -> [m, n]``."""
    return lax.dot_general(
        a,
        b,
        (((1,), (1,)), ((), ())),
        precision=_precision(a),
        preferred_element_type=jnp.float32,
    )


def dot_nn(a: jax.Array, b: jax.Array) -> jax.Array:
    """``a @ b`` with float32 accumulation: ``[m, k] x [k, n] -> [m, n]``."""
    return lax.dot_general(
        a,
        b,
        (((1,), (0,)), ((), ())),
        precision=_precision(a),
        preferred_element_type=jnp.float32,
    )


def scaled(x: jax.Array, scale: float) -> jax.Array:
    """``x * scale`` computed in float32 and rounded once to ``x``'s dtype."""
    return (x.astype(jnp.float32) * scale).astype(x.dtype)


def row_to_column(row: jax.Array) -> jax.Array:
    """A ``[1, n]`` row as an ``[n, LANES]`` lane-replicated column (one aligned transpose).

    Per-query vectors (log-sum-exp, delta, segment ids) live in HBM as rows so they cost O(T);
    kernels that need them down the sublanes turn them once per block with this.
    """
    return jnp.transpose(jnp.broadcast_to(row, (LANES, row.shape[1])))


def column_to_row(col: jax.Array) -> jax.Array:
    """The first lane of an ``[n, LANES]`` column as a ``[1, n]`` row."""
    return jnp.transpose(col)[:1, :]


def positions(start: jax.Array, shape: tuple[int, int], axis: int) -> jax.Array:
    """Absolute token positions along ``axis`` of a 2-D block starting at ``start``."""
    return start + lax.broadcasted_iota(jnp.int32, shape, axis)


def soft_cap(s: jax.Array, cap: float | None) -> tuple[jax.Array, jax.Array | None]:
    """``cap * tanh(s / cap)`` and the tanh (for the backward's ``1 - tanh^2``); identity if no cap."""
    if cap is None:
        return s, None
    t = jnp.tanh(s * (1.0 / cap))
    return cap * t, t


def head_columns(h: Any, width: int) -> Any:
    """Head ``h``'s lane-aligned columns of a ``(rows, heads·width)`` block (``h`` an int, or
    traced inside :func:`for_each_head`'s loop): the values' and output's columns when their
    head dim differs from the queries' (contract 1.3)."""
    if isinstance(h, int):
        return slice(h * width, (h + 1) * width)
    return pl.ds(pl.multiple_of(h * width, width), width)


def for_each_head(heads: int, head_dim_padded: int, body: Callable[[Any, Any], None]) -> None:
    """Run ``body(h, cols)`` for the ``heads`` query heads of a grid step.

    ``h`` indexes per-head scratch (leading axis); ``cols`` selects head ``h``'s lane-aligned
    columns of a ``(rows, heads·Hp)`` block. A rolled loop, not an unrolled one: Mosaic's
    compile time grows with the code of a step, and the heads share nothing but the key/value
    block and the mask already in VMEM. One head is called directly (the MHA kernel as before).
    """
    if heads == 1:
        body(0, slice(0, head_dim_padded))
        return

    def step(h: jax.Array, carry: int) -> int:
        body(h, pl.ds(pl.multiple_of(h * head_dim_padded, head_dim_padded), head_dim_padded))
        return carry

    lax.fori_loop(0, heads, step, 0)
