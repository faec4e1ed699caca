"""Moving arrays between the contract layout and the blocked layouts the loops index.

Blocked layouts put the block index first (so a loop step is one contiguous slice) and keep
the ``G = N // K`` query heads that share a key/value head next to the query rows: a query
block is ``[B, K, block_q * G, H]``, so grouped-query attention is one matmul per key/value
head and K/V are never repeated in memory.

Some operands are also kept transposed (``[..., H, rows]``) so that every block matmul is a
plain ``[m, k] @ [k, n]`` product: XLA's CPU dot runs several times slower when an operand
is contracted along its leading axis, and transposing once per call costs O(T).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from ._policy import Plan


def _pad_axis(x: jax.Array, axis: int, length: int) -> jax.Array:
    extra = length - x.shape[axis]
    if extra == 0:
        return x
    widths = [(0, 0)] * x.ndim
    widths[axis] = (0, extra)
    return jnp.pad(x, widths)


def block_queries(x: jax.Array, plan: Plan) -> jax.Array:
    """``[B, T, N, H]`` → ``[nq, B, K, block_q * G, H]`` (zero-padded rows at the end)."""
    spec = plan.spec
    b, _, _, h = x.shape
    k, g = spec.num_kv_heads, spec.group_size
    x = _pad_axis(x, 1, plan.padded_q_len)
    x = x.reshape(b, plan.num_q_blocks, plan.block_q, k, g, h)
    x = x.transpose(1, 0, 3, 2, 4, 5)
    return x.reshape(plan.num_q_blocks, b, k, plan.block_q * g, h)


def unblock_queries(x: jax.Array, plan: Plan) -> jax.Array:
    """Inverse of :func:`block_queries`: ``[nq, B, K, block_q * G, H]`` → ``[B, T, N, H]``."""
    spec = plan.spec
    _, b, k, _, h = x.shape
    g = spec.group_size
    x = x.reshape(plan.num_q_blocks, b, k, plan.block_q, g, h)
    x = x.transpose(1, 0, 3, 2, 4, 5)
    x = x.reshape(b, plan.padded_q_len, k * g, h)
    return x[:, : spec.q_len]


def block_queries_transposed(x: jax.Array, plan: Plan) -> jax.Array:
    """``[B, T, N, H]`` → ``[nq, B, K, H, block_q * G]``, rows ordered as :func:`block_queries`."""
    spec = plan.spec
    b, _, _, h = x.shape
    k, g = spec.num_kv_heads, spec.group_size
    x = _pad_axis(x, 1, plan.padded_q_len)
    x = x.reshape(b, plan.num_q_blocks, plan.block_q, k, g, h)
    x = x.transpose(1, 0, 3, 5, 2, 4)
    return x.reshape(plan.num_q_blocks, b, k, h, plan.block_q * g)


def block_query_rows(x: jax.Array, plan: Plan) -> jax.Array:
    """Per-row statistics ``[B, T, N]`` → ``[nq, B, K, block_q * G]``."""
    spec = plan.spec
    b = x.shape[0]
    k, g = spec.num_kv_heads, spec.group_size
    x = _pad_axis(x, 1, plan.padded_q_len)
    x = x.reshape(b, plan.num_q_blocks, plan.block_q, k, g)
    x = x.transpose(1, 0, 3, 2, 4)
    return x.reshape(plan.num_q_blocks, b, k, plan.block_q * g)


def block_keys(x: jax.Array, plan: Plan) -> jax.Array:
    """``[B, S, K, H]`` → ``[nk, B, K, block_kv, H]`` (zero-padded keys at the end)."""
    b, _, k, h = x.shape
    x = _pad_axis(x, 1, plan.padded_kv_len)
    x = x.reshape(b, plan.num_kv_blocks, plan.block_kv, k, h)
    return x.transpose(1, 0, 3, 2, 4)


def block_keys_transposed(x: jax.Array, plan: Plan) -> jax.Array:
    """``[B, S, K, H]`` → ``[nk, B, K, H, block_kv]`` (values: their own ``Hv``)."""
    b, _, k, h = x.shape
    x = _pad_axis(x, 1, plan.padded_kv_len)
    x = x.reshape(b, plan.num_kv_blocks, plan.block_kv, k, h)
    return x.transpose(1, 0, 3, 4, 2)


def unblock_keys_transposed(x: jax.Array, plan: Plan) -> jax.Array:
    """Inverse of :func:`block_keys_transposed`: → ``[B, S, K, H]``."""
    _, b, k, h, _ = x.shape
    x = x.transpose(1, 0, 4, 2, 3).reshape(b, plan.padded_kv_len, k, h)
    return x[:, : plan.spec.kv_len]


def unblock_keys(x: jax.Array, plan: Plan) -> jax.Array:
    """Inverse of :func:`block_keys`: ``[nk, B, K, block_kv, H]`` → ``[B, S, K, H]``."""
    _, b, k, _, h = x.shape
    x = x.transpose(1, 0, 3, 2, 4).reshape(b, plan.padded_kv_len, k, h)
    return x[:, : plan.spec.kv_len]


def block_ids(ids: jax.Array, block: int, num_blocks: int) -> jax.Array:
    """Segment ids ``[B, L]`` → ``[num_blocks, B, block]``.

    The tail repeats the last id, so per-block id ranges (used to skip blocks) are not widened
    by padding; padded keys are masked by position anyway.
    """
    b, length = ids.shape
    extra = block * num_blocks - length
    if extra:
        ids = jnp.pad(ids, ((0, 0), (0, extra)), mode="edge")
    return ids.reshape(b, num_blocks, block).transpose(1, 0, 2)


def sink_rows(sinks: jax.Array, plan: Plan) -> jax.Array:
    """Sink logits ``[N]`` → ``[K, block_q * G]``, one per row of a query block (rows ordered
    as :func:`block_queries` orders them: query position, then the group's heads)."""
    k, g = plan.spec.num_kv_heads, plan.spec.group_size
    return jnp.tile(sinks.reshape(k, g), (1, plan.block_q))


def sink_gradient(rows: jax.Array, plan: Plan) -> jax.Array:
    """Per-row terms ``[..., K, block_q * G]`` summed into one per query head ``[N]``."""
    k, g = plan.spec.num_kv_heads, plan.spec.group_size
    per_head = rows.reshape(-1, k, plan.block_q, g).sum(axis=(0, 2))
    return per_head.reshape(k * g)
