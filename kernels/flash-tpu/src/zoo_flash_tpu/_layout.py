"""HBM layouts the kernels read: padding and free reshapes done in the wrapper, not the caller.

``[B, L, heads, H]`` becomes ``[B, Lp, heads * Hp]``: the sequence padded to whole blocks and
the head dim to the lane width (zeros, which change no score and no output). A head is then
column block ``h`` of width ``Hp``, so a BlockSpec picks (batch, sequence block, head) directly:
no transpose to a heads-major layout, and when nothing needs padding no copy at all. The
query head -> key/value head mapping of GQA lives in the index maps, so repeated K/V are never
materialised.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def to_kernel(x: jax.Array, length_padded: int, head_dim_padded: int) -> jax.Array:
    """``[B, L, heads, H] -> [B, Lp, heads * Hp]``, zero-padded."""
    b, length, heads, h = x.shape
    if length_padded != length or head_dim_padded != h:
        x = jnp.pad(x, ((0, 0), (0, length_padded - length), (0, 0), (0, head_dim_padded - h)))
    return x.reshape(b, length_padded, heads * head_dim_padded)


def from_kernel(y: jax.Array, length: int, heads: int, head_dim: int) -> jax.Array:
    """``[B, Lp, heads * Hp] -> [B, L, heads, H]``, dropping the padding."""
    b, length_padded, width = y.shape
    y = y.reshape(b, length_padded, heads, width // heads)
    return y[:, :length, :, :head_dim]


def per_query_rows(x: jax.Array, length_padded: int) -> jax.Array:
    """``[B, T, N]`` float32 -> ``[B, N, 1, Tp]``: one lane-dense row per head, zero-padded."""
    t = x.shape[1]
    x = jnp.transpose(x, (0, 2, 1))[:, :, None, :]
    return jnp.pad(x, ((0, 0), (0, 0), (0, 0), (0, length_padded - t)))


def padded_ids(ids: jax.Array, length_padded: int) -> jax.Array:
    """``[B, L]`` int32 -> ``[B, Lp]``, padded with each row's last id.

    Repeating the last id keeps the per-block id ranges as tight as the data; padded keys are
    masked by position and padded queries are discarded, so the value is otherwise irrelevant.
    """
    length = ids.shape[1]
    return jnp.pad(ids, ((0, 0), (0, length_padded - length)), mode="edge")
