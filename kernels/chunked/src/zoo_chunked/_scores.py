"""The logits of one (query block, key block) pair and its mask, shared by both passes."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from zoo_attention import visible

from ._policy import Plan

# Finite, so exp(masked - running_max) is exactly 0 once a row has seen a key, and a row that
# has seen none yet stays finite (its running max is exactly this value; see _forward).
MASKED = -0.7 * float(jnp.finfo(jnp.float32).max)


def accumulator_dtype(dtype: jnp.dtype) -> jnp.dtype:
    """float32 for 16-bit inputs, float64 for float64 inputs."""
    return jnp.promote_types(dtype, jnp.float32)


def block_logits(
    q_blk: jax.Array, kt_blk: jax.Array, plan: Plan
) -> tuple[jax.Array, jax.Array | None]:
    """Scaled, soft-capped logits ``[B, K, R, bk]`` (``R = block_q * G``) of one block pair.

    ``q_blk`` is ``[B, K, R, H]`` and ``kt_blk`` the transposed key block ``[B, K, H, bk]``.

    Also returns ``d logits / d (q·k)`` divided by the scale's contribution, i.e. the soft cap's
    ``1 - tanh²`` factor, when a cap is set (else ``None``), for the backward pass.
    """
    spec = plan.spec
    acc = accumulator_dtype(q_blk.dtype)
    logits = jnp.einsum("bkrh,bkhs->bkrs", q_blk, kt_blk, preferred_element_type=acc)
    logits = logits * jnp.asarray(spec.scale, acc)
    if spec.logits_soft_cap is None:
        return logits, None
    cap = jnp.asarray(spec.logits_soft_cap, acc)
    tanh = jnp.tanh(logits / cap)
    return cap * tanh, 1.0 - tanh * tanh


def block_mask(
    i: jax.Array,
    j: jax.Array,
    q_ids: jax.Array | None,
    kv_ids: jax.Array | None,
    plan: Plan,
    q_offset: jax.Array,
) -> jax.Array | None:
    """Visibility of block pair ``(i, j)``, broadcastable to ``[B, K, block_q, G, block_kv]``.

    Args:
        i, j: query and key block indices; ``q_offset``: the position of query row 0.
        q_ids: ``[B, block_q]`` segment ids of the query block, or ``None``.
        kv_ids: ``[B, block_kv]`` segment ids of the key block, or ``None``.
    """
    bq, bk = plan.block_q, plan.block_kv
    q_pos = (q_offset + i * bq + jnp.arange(bq, dtype=jnp.int32))[:, None, None]
    kv_pos = (j * bk + jnp.arange(bk, dtype=jnp.int32))[None, None, :]
    q_seg = kv_seg = None
    if q_ids is not None and kv_ids is not None:
        q_seg = q_ids[:, None, :, None, None]
        kv_seg = kv_ids[:, None, None, None, :]
    mask = visible(q_pos, kv_pos, plan.spec, q_seg, kv_seg)
    if plan.kv_tail:
        real = kv_pos < plan.spec.kv_len
        mask = real if mask is None else jnp.logical_and(mask, real)
    return mask


def apply_mask(logits: jax.Array, mask: jax.Array | None, plan: Plan) -> jax.Array:
    """Set logits ``[B, K, R, bk]`` that ``mask`` hides to :data:`MASKED`."""
    if mask is None:
        return logits
    b, k, r, bk = logits.shape
    grouped = logits.reshape(b, k, plan.block_q, plan.spec.group_size, bk)
    grouped = jnp.where(mask, grouped, jnp.asarray(MASKED, logits.dtype))
    return grouped.reshape(b, k, r, bk)
