"""``xla``: the reference kernel. Plain einsum and softmax, float32 accumulation, every feature."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from ._kernel import AttentionKernel
from ._mask import soft_cap, visible
from ._spec import AttentionSpec

# Finite, so a row that sees no key gives a uniform softmax (finite gradients) that the
# row mask then zeroes, instead of NaN from exp(-inf - -inf).
_MASKED = -0.7 * float(jnp.finfo(jnp.float32).max)


class XlaKernel(AttentionKernel):
    """Materialises the ``[B, K, G, T, S]`` score matrix; O(T·S) memory, any platform; every
    feature of contract 1.3 (sinks, a value head dim of its own)."""

    name = "xla"
    priority = 0
    separate_value_head_dim = True

    def check(self, spec: AttentionSpec) -> str | None:
        return None

    def __call__(
        self,
        query: jax.Array,
        key: jax.Array,
        value: jax.Array,
        segment_ids: tuple[jax.Array, jax.Array] | None,
        spec: AttentionSpec,
        *,
        query_offset: jax.Array | None = None,
        sinks: jax.Array | None = None,
    ) -> jax.Array:
        b, t, n, h = query.shape
        hv = value.shape[-1]
        k = spec.num_kv_heads
        g = spec.group_size
        # Query heads n = kv_head * g + j share kv_head, the layout jax.nn uses for GQA.
        q = query.reshape(b, t, k, g, h)
        logits = jnp.einsum("btkgh,bskh->bkgts", q, key, preferred_element_type=jnp.float32)
        logits = soft_cap(logits * spec.scale, spec.logits_soft_cap)
        q_pos = jnp.arange(spec.q_len, dtype=jnp.int32)[:, None]
        if query_offset is not None:
            q_pos = q_pos + query_offset
        kv_pos = jnp.arange(spec.kv_len, dtype=jnp.int32)[None, :]
        q_seg = kv_seg = None
        if segment_ids is not None:
            q_seg = segment_ids[0][:, None, None, :, None]
            kv_seg = segment_ids[1][:, None, None, None, :]
        mask = visible(q_pos, kv_pos, spec, q_seg, kv_seg)
        if mask is not None:
            mask = jnp.broadcast_to(mask, logits.shape)
            logits = jnp.where(mask, logits, _MASKED)
        if sinks is None:
            probs = jax.nn.softmax(logits, axis=-1)
        else:
            # The sink is one more column of the softmax, dropped after it: it takes its share
            # of the denominator and adds nothing to the output.
            column = sinks.astype(jnp.float32).reshape(1, k, g, 1, 1)
            column = jnp.broadcast_to(column, (*logits.shape[:-1], 1))
            probs = jax.nn.softmax(jnp.concatenate([logits, column], axis=-1), axis=-1)[..., :-1]
        if mask is not None:
            probs = jnp.where(jnp.any(mask, axis=-1, keepdims=True), probs, 0.0)
        out = jnp.einsum(
            "bkgts,bskh->btkgh",
            probs.astype(value.dtype),
            value,
            preferred_element_type=jnp.float32,
        )
        return out.reshape(b, t, n, hv).astype(query.dtype)


KERNEL = XlaKernel()
