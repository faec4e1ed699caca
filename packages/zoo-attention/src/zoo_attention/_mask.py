"""The visibility rule of the contract, as one broadcasting function kernels can share."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from ._spec import AttentionSpec


def visible(
    q_positions: jax.Array,
    kv_positions: jax.Array,
    spec: AttentionSpec,
    q_segments: jax.Array | None = None,
    kv_segments: jax.Array | None = None,
) -> jax.Array | None:
    """Whether query position i may see key position j, broadcasting the inputs.

    ``q_positions``/``q_segments`` broadcast along the query axis and ``kv_positions``/
    ``kv_segments`` along the key axis (for example ``[T, 1]`` and ``[1, S]``). Returns ``None``
    when the spec masks nothing, so callers can skip the select entirely.
    """
    mask = None

    def _and(a: jax.Array | None, b: jax.Array) -> jax.Array:
        return b if a is None else jnp.logical_and(a, b)

    if spec.is_causal:
        mask = _and(mask, kv_positions <= q_positions)
    if spec.local_window is not None:
        left, right = spec.local_window
        mask = _and(mask, kv_positions >= q_positions - left)
        mask = _and(mask, kv_positions <= q_positions + right)
    if q_segments is not None and kv_segments is not None:
        mask = _and(mask, q_segments == kv_segments)
    return mask


def soft_cap(logits: jax.Array, cap: float | None) -> jax.Array:
    """``cap * tanh(logits / cap)``, or the logits unchanged when ``cap`` is ``None``."""
    if cap is None:
        return logits
    return cap * jnp.tanh(logits / cap)
