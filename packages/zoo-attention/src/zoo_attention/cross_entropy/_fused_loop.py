"""The loops of ``fused_xla`` over token tiles under ``lax.scan``, on one device's tokens (or
on all of them, left to XLA): the outputs alone, and the outputs with the gradients.

Tile ``c`` of ``C`` holds tokens ``c, c + C, c + 2C, ...``: the tokens viewed as ``[n, C]``
(a reshape, no copy), each step taking column ``c``. When XLA partitions the loop and the
tokens are sharded over devices in contiguous blocks, that sharding carries over to the ``n``
rows of every tile, so every device works on every step and no tile moves between devices.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp

from .._partition import Axes
from ._fused_tile import tile_dlogits, tile_grads, tile_logits
from ._logits import spec_logits
from ._spec import CrossEntropySpec

#: ``cotangents(c, log_z)``: the cotangents ``(g_ce, g_log_z)`` ``[n]`` of tile ``c``'s
#: ``ce`` and ``log_z``, given its ``log_z``.
Cotangents = Callable[[jax.Array, jax.Array], tuple[jax.Array, jax.Array]]


def tiled(x: jax.Array, tile: int) -> jax.Array:
    """``x [N, ...]`` padded with zeros to whole tiles and viewed as ``[n, C, ...]``: column
    ``c`` is tile ``c``."""
    chunks = -(-x.shape[0] // tile)
    extra = chunks * tile - x.shape[0]
    if extra:
        x = jnp.pad(x, [(0, extra)] + [(0, 0)] * (x.ndim - 1))
    return x.reshape(x.shape[0] // chunks, chunks, *x.shape[1:])


def column(x: jax.Array, c: jax.Array) -> jax.Array:
    """Tile ``c`` of a :func:`tiled` array."""
    return jax.lax.dynamic_index_in_dim(x, c, axis=1, keepdims=False)


def _untiled(columns: jax.Array, n: int) -> jax.Array:
    """Per-tile results ``[C, n']`` back in token order, the padding dropped: ``[n]``."""
    return columns.T.reshape(-1)[:n]


def outputs(
    hidden: jax.Array,
    head: jax.Array,
    targets: jax.Array,
    offset: jax.Array,
    vocab_axes: Axes,
    spec: CrossEntropySpec,
    tile: int,
) -> tuple[jax.Array, jax.Array]:
    """Every token's ``(ce, log_z)``, float32 ``[N]``, whether or not it counts."""
    h, t = tiled(hidden, tile), tiled(targets, tile)

    def step(carry: None, c: jax.Array) -> tuple[None, tuple[jax.Array, jax.Array]]:
        _, ce, log_z = tile_logits(column(h, c), head, column(t, c), offset, vocab_axes, spec)
        return None, (ce, log_z)

    _, (ce, log_z) = jax.lax.scan(step, None, jnp.arange(h.shape[1]))
    n = hidden.shape[0]
    return _untiled(ce, n), _untiled(log_z, n)


def gradients(
    hidden: jax.Array,
    head: jax.Array,
    targets: jax.Array,
    counts: jax.Array,
    offset: jax.Array,
    vocab_axes: Axes,
    spec: CrossEntropySpec,
    tile: int,
    cotangents: Cotangents,
    log_z: jax.Array | None = None,
) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
    """``(ce, log_z, d_hidden, d_head)``: every token's outputs (float32 ``[N]``), the
    gradient of ``hidden`` (its dtype; over a sharded vocabulary this device's share of the
    sum) and of the head (float32, its layout) for the tiles' ``cotangents``.

    With ``log_z`` (the forward pass's, ``[N]``) each tile's logits are recomputed and the
    ``ce`` returned is zeros; without it each tile computes its outputs first, so the loop
    is the forward pass and the backward pass at once.
    """
    h, t, k = tiled(hidden, tile), tiled(targets, tile), tiled(counts, tile)
    lz = None if log_z is None else tiled(log_z, tile)

    def step(
        carry: tuple[jax.Array, jax.Array], c: jax.Array
    ) -> tuple[tuple[jax.Array, jax.Array], tuple[jax.Array, jax.Array]]:
        d_hidden, d_head = carry
        hc, tc = column(h, c), column(t, c)
        if lz is None:
            logits, ce, log_z_c = tile_logits(hc, head, tc, offset, vocab_axes, spec)
        else:
            logits, log_z_c = spec_logits(hc, head, spec), column(lz, c)
            ce = jnp.zeros_like(log_z_c)
        g_ce, g_log_z = cotangents(c, log_z_c)
        d = tile_dlogits(logits, tc, offset, log_z_c, g_ce, g_log_z, column(k, c), spec)
        dh, dw = tile_grads(d, hc, head, spec)
        d_hidden = jax.lax.dynamic_update_index_in_dim(d_hidden, dh.astype(h.dtype), c, axis=1)
        return (d_hidden, d_head + dw), (ce, log_z_c)

    start = (jnp.zeros_like(h), jnp.zeros(head.shape, jnp.float32))
    (d_hidden, d_head), (ce, log_z_out) = jax.lax.scan(step, start, jnp.arange(h.shape[1]))
    n = hidden.shape[0]
    d_hidden = d_hidden.reshape(-1, hidden.shape[-1])[:n]
    return _untiled(ce, n), _untiled(log_z_out, n), d_hidden, d_head
