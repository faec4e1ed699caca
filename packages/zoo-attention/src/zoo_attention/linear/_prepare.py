"""What every gated-delta-rule kernel does to its inputs first, in float32: the optional L2
normalisation of queries and keys, the query scale, and the grouped heads.

Kernels call these (plain JAX, differentiated by autodiff) before their own recurrence, so the
normalisation is the same in every kernel and in the contract's definition.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from ._spec import LinearAttentionSpec

#: The epsilon of the L2 normalisation, inside the square root (flash-linear-attention's and
#: transformers' ``l2norm``): ``x / sqrt(sum(x**2) + eps)``.
L2_EPS = 1e-6


def l2_normalize(x: jax.Array, eps: float = L2_EPS) -> jax.Array:
    """``x / sqrt(sum(x**2, -1) + eps)`` in float32."""
    x = x.astype(jnp.float32)
    return x * jax.lax.rsqrt(jnp.sum(x * x, axis=-1, keepdims=True) + eps)


def prepare_qk(
    query: jax.Array, key: jax.Array, spec: LinearAttentionSpec, *, expand: bool = True
) -> tuple[jax.Array, jax.Array]:
    """Float32 queries and keys as the recurrence reads them: L2-normalised when
    ``spec.normalize_qk``, queries multiplied by ``spec.scale``; with ``expand``, repeated to
    ``[B, T, N, Dk]`` so value head ``n`` has its query/key head ``n // group``."""
    if spec.normalize_qk:
        q, k = l2_normalize(query), l2_normalize(key)
    else:
        q, k = query.astype(jnp.float32), key.astype(jnp.float32)
    q = q * jnp.float32(spec.scale)
    if expand and spec.group_size > 1:
        q, k = (jnp.repeat(x, spec.group_size, axis=2) for x in (q, k))
    return q, k


def document_starts(segment_ids: jax.Array | None, batch: int, seq_len: int) -> jax.Array:
    """bool ``[B, T]``: ``True`` where a token starts a new document after the first token (the
    state is reset there); all ``False`` without segment ids."""
    if segment_ids is None:
        return jnp.zeros((batch, seq_len), bool)
    changed = segment_ids[:, 1:] != segment_ids[:, :-1]
    return jnp.concatenate([jnp.zeros((batch, 1), bool), changed], axis=1)
