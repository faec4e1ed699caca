"""Load balancing for causal attention over a sequence-sharded axis: the dual-chunk order.

Split into contiguous blocks, a causal sequence gives the last shard ``C`` times the work of
the first (its queries see every key). Cut the sequence into ``2C`` chunks instead and give
shard ``d`` chunks ``d`` and ``2C - 1 - d``: every shard then holds one early and one late
chunk, and the same number of visible (query, key) pairs. The data are laid out in this order
before the model sees them (positions and segment ids travel with the tokens); attention
restores the natural order of the gathered keys.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np


def dual_chunk_chunks(shard: Any, shards: int) -> tuple[Any, Any]:
    """The two chunks (of ``2 * shards``) that ``shard`` holds: ``(shard, 2*shards-1-shard)``
    (``shard`` an int, or a traced index inside ``shard_map``)."""
    return shard, 2 * shards - 1 - shard


def dual_chunk_order(length: int, shards: int) -> np.ndarray:
    """``order[i]``: the natural position at place ``i`` of the balanced layout, int ``[length]``.

    ``x[..., order]`` lays a sequence out balanced; shard ``d`` of the result (contiguous block
    ``d`` of ``length // shards``) holds chunks ``d`` and ``2*shards-1-d``.

    Raises:
        ValueError: ``length`` is not a multiple of ``2 * shards``.
    """
    if shards < 1 or length % (2 * shards):
        raise ValueError(
            f"a load-balanced sequence of {length} over {shards} shards needs a length that is "
            f"a multiple of {2 * shards}; change the sequence length or the context axis."
        )
    chunk = length // (2 * shards)
    chunks = [c for d in range(shards) for c in dual_chunk_chunks(d, shards)]
    return np.concatenate([np.arange(c * chunk, (c + 1) * chunk) for c in chunks])


def natural_order(length: int, shards: int) -> np.ndarray:
    """The inverse of :func:`dual_chunk_order`: ``balanced[..., natural_order(...)]`` is the
    sequence in its natural order again."""
    return np.argsort(dual_chunk_order(length, shards))


def _chunks(x: jax.Array, shards: int, axis: int) -> tuple[jax.Array, tuple[int, ...]]:
    shape = x.shape
    if shape[axis] % (2 * shards):
        raise ValueError(
            f"a load-balanced sequence of {shape[axis]} over {shards} shards needs a length "
            f"that is a multiple of {2 * shards}."
        )
    split = (*shape[:axis], 2 * shards, shape[axis] // (2 * shards), *shape[axis + 1 :])
    return x.reshape(split), shape


def to_dual_chunk(x: jax.Array, shards: int, axis: int = 1) -> jax.Array:
    """``x`` with its ``axis`` laid out in the dual-chunk order (``x[..., dual_chunk_order]``
    along ``axis``), by reshapes and a flip instead of a gather."""
    chunks, shape = _chunks(x, shards, axis)
    first = jax.lax.slice_in_dim(chunks, 0, shards, axis=axis)
    second = jnp.flip(jax.lax.slice_in_dim(chunks, shards, 2 * shards, axis=axis), axis=axis)
    return jnp.stack([first, second], axis=axis + 1).reshape(shape)


def from_dual_chunk(x: jax.Array, shards: int, axis: int = 1) -> jax.Array:
    """The inverse of :func:`to_dual_chunk`: ``x``'s ``axis`` back in natural order."""
    chunks, shape = _chunks(x, shards, axis)
    pairs = chunks.reshape(*shape[:axis], shards, 2, *chunks.shape[axis + 1 :])
    first = jax.lax.index_in_dim(pairs, 0, axis=axis + 1, keepdims=False)
    second = jnp.flip(jax.lax.index_in_dim(pairs, 1, axis=axis + 1, keepdims=False), axis=axis)
    return jnp.concatenate([first, second], axis=axis).reshape(shape)
