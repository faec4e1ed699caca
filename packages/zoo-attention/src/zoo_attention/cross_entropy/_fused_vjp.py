"""``fused_cross_entropy``: the tiles of ``fused_xla`` under ``lax.scan``, with a custom VJP
that keeps only each token's log normaliser and recomputes a tile's logits in the backward
pass. Peak memory is one tile's logits (a few times over), not ``[N, V]``.

Tile ``c`` of ``C`` holds tokens ``c, c + C, c + 2C, ...``: the tokens viewed as ``[n, C]``
(a reshape, no copy), each step taking column ``c``. When the tokens are sharded over
devices in contiguous blocks (the batch split over a mesh), that sharding carries over to the
``n`` rows of every tile, so every device works on every step and no tile moves between
devices. The vocabulary is whole in each tile, so a head sharded over a tensor axis keeps its
sharding (each device's logits are its share of the vocabulary's).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from ._fused_tile import tile_backward, tile_forward
from ._spec import CrossEntropySpec


def _pad(x: jax.Array, tokens: int) -> jax.Array:
    extra = tokens - x.shape[0]
    if extra == 0:
        return x
    return jnp.pad(x, [(0, extra)] + [(0, 0)] * (x.ndim - 1))


def _columns(x: jax.Array, chunks: int) -> jax.Array:
    """``x [C * n, ...]`` as ``[n, C, ...]``: column ``c`` is tile ``c``."""
    return x.reshape(x.shape[0] // chunks, chunks, *x.shape[1:])


def _column(x: jax.Array, c: jax.Array) -> jax.Array:
    return jax.lax.dynamic_index_in_dim(x, c, axis=1, keepdims=False)


def _tokens(columns: jax.Array) -> jax.Array:
    """Per-tile results ``[C, n]`` back in token order ``[C * n]``."""
    return columns.T.reshape(-1)


@functools.partial(jax.custom_vjp, nondiff_argnums=(4, 5))
def fused_cross_entropy(
    hidden: jax.Array,
    head: jax.Array,
    targets: jax.Array,
    counts: jax.Array,
    spec: CrossEntropySpec,
    tile: int,
) -> tuple[jax.Array, jax.Array]:
    """``(ce, log_z)`` float32 ``[N]`` of ``hidden [N, D]`` against ``head``, ``tile`` tokens
    at a time; zero where ``counts [N]`` (bool) is false."""
    (ce, log_z), _ = _forward(hidden, head, targets, counts, spec, tile)
    return ce, log_z


def _forward(
    hidden: jax.Array,
    head: jax.Array,
    targets: jax.Array,
    counts: jax.Array,
    spec: CrossEntropySpec,
    tile: int,
) -> tuple[tuple[jax.Array, jax.Array], jax.Array]:
    """The outputs, and every token's log normaliser (the backward pass's residual)."""
    n = hidden.shape[0]
    chunks = -(-n // tile)
    total = chunks * tile
    w = head.astype(hidden.dtype)
    h = _columns(_pad(hidden, total), chunks)
    t = _columns(_pad(targets, total), chunks)

    def step(carry: None, c: jax.Array) -> tuple[None, tuple[jax.Array, jax.Array]]:
        return None, tile_forward(_column(h, c), w, _column(t, c), spec)

    _, (ce, log_z) = jax.lax.scan(step, None, jnp.arange(chunks))
    ce, log_z = _tokens(ce)[:n], _tokens(log_z)[:n]
    outputs = (jnp.where(counts, ce, 0.0), jnp.where(counts, log_z, 0.0))
    return outputs, log_z


def _fwd(
    hidden: jax.Array,
    head: jax.Array,
    targets: jax.Array,
    counts: jax.Array,
    spec: CrossEntropySpec,
    tile: int,
) -> tuple[tuple[jax.Array, jax.Array], tuple[jax.Array, ...]]:
    outputs, log_z = _forward(hidden, head, targets, counts, spec, tile)
    return outputs, (hidden, head, targets, counts, log_z)


def _bwd(
    spec: CrossEntropySpec,
    tile: int,
    residuals: tuple[jax.Array, ...],
    cotangents: tuple[jax.Array, jax.Array],
) -> tuple[jax.Array, jax.Array, None, None]:
    hidden, head, targets, counts, log_z = residuals
    g_ce, g_log_z = (g.astype(jnp.float32) for g in cotangents)
    n = hidden.shape[0]
    chunks = -(-n // tile)
    total = chunks * tile
    w = head.astype(hidden.dtype)
    columns = functools.partial(_columns, chunks=chunks)
    h = columns(_pad(hidden, total))
    t, k = columns(_pad(targets, total)), columns(_pad(counts, total))
    lz, gc, gz = (columns(_pad(x, total)) for x in (log_z, g_ce, g_log_z))

    def step(
        carry: tuple[jax.Array, jax.Array], c: jax.Array
    ) -> tuple[tuple[jax.Array, jax.Array], None]:
        d_hidden, d_head = carry
        dh, dw = tile_backward(
            _column(h, c),
            w,
            _column(t, c),
            _column(k, c),
            _column(lz, c),
            _column(gc, c),
            _column(gz, c),
            spec,
        )
        d_hidden = jax.lax.dynamic_update_index_in_dim(d_hidden, dh.astype(h.dtype), c, axis=1)
        return (d_hidden, d_head + dw), None

    start = (jnp.zeros_like(h), jnp.zeros(w.shape, jnp.float32))
    (d_hidden, d_head), _ = jax.lax.scan(step, start, jnp.arange(chunks))
    d_hidden = d_hidden.reshape(total, -1)[:n]
    return d_hidden, d_head.astype(head.dtype), None, None


fused_cross_entropy.defvjp(_fwd, _bwd)
