"""The router's decision: softmax over the experts, the top ``k``, and their weights."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, Int


def route(
    logits: Float[Array, "N E"], top_k: int, *, normalize: bool
) -> tuple[Float[Array, "N k"], Int[Array, "N k"]]:
    """``(weights, experts)`` of each token: the ``top_k`` largest softmax probabilities
    (float32) and their experts, largest first.

    ``normalize`` divides the ``top_k`` probabilities by their sum (Mixtral always; Qwen3-MoE's
    ``norm_topk_prob``); otherwise they are the probabilities themselves.
    """
    probs = jax.nn.softmax(logits.astype(jnp.float32), axis=-1)
    weights, experts = jax.lax.top_k(probs, top_k)
    if normalize:
        weights = weights / jnp.sum(weights, axis=-1, keepdims=True)
    return weights, experts.astype(jnp.int32)
