"""The router's decision: each token's ``k`` experts and their weights.

Two scorings: ``"softmax"`` (Mixtral, Qwen3-MoE, gpt-oss: the top ``k`` softmax probabilities,
renormalised or not) and ``"sigmoid"`` (DeepSeek-V3: each expert's sigmoid score; the
selection adds a per-expert correction bias and may first keep the best ``group_top_k`` of
``groups`` groups of experts, ranked by the sum of their two best scores; the weights are the
uncorrected scores of the chosen experts).
"""

from __future__ import annotations

from typing import Literal

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, Int

Scoring = Literal["softmax", "sigmoid"]


def route(
    logits: Float[Array, "N E"],
    top_k: int,
    *,
    normalize: bool,
    scoring: Scoring = "softmax",
    correction_bias: Float[Array, " E"] | None = None,
    groups: int = 1,
    group_top_k: int = 1,
    scale: float = 1.0,
) -> tuple[Float[Array, "N k"], Int[Array, "N k"]]:
    """``(weights, experts)`` of each token (float32, int32), largest choice first.

    Args:
        logits: the router's logits (float32).
        top_k: experts per token.
        normalize: divide the ``top_k`` weights by their sum (Mixtral always; Qwen3-MoE's and
            DeepSeek's ``norm_topk_prob``); otherwise they are the probabilities or scores
            themselves.
        scoring: ``"softmax"`` or ``"sigmoid"`` (see the module's docstring).
        correction_bias: ``[E]``, added to the sigmoid scores for the selection only
            (DeepSeek-V3's ``e_score_correction_bias``, kept out of the gradient).
        groups, group_top_k: with ``groups > 1`` (sigmoid scoring), experts are chosen from the
            ``group_top_k`` groups whose two best corrected scores sum highest.
        scale: multiplies the weights (DeepSeek's ``routed_scaling_factor``).
    """
    logits = logits.astype(jnp.float32)
    if scoring == "softmax":
        probs = jax.nn.softmax(logits, axis=-1)
        weights, experts = jax.lax.top_k(probs, top_k)
        if normalize:
            weights = weights / jnp.sum(weights, axis=-1, keepdims=True)
    elif scoring == "sigmoid":
        scores = jax.nn.sigmoid(logits)
        choice = scores
        if correction_bias is not None:
            choice = choice + jax.lax.stop_gradient(correction_bias.astype(jnp.float32))
        if groups > 1:
            n, e = choice.shape
            per_group = choice.reshape(n, groups, e // groups)
            group_scores = jnp.sum(jax.lax.top_k(per_group, 2)[0], axis=-1)  # [N, groups]
            _, kept = jax.lax.top_k(group_scores, group_top_k)
            keep = jnp.sum(jax.nn.one_hot(kept, groups, dtype=jnp.int32), axis=-2) > 0
            choice = jnp.where(jnp.repeat(keep, e // groups, axis=-1), choice, -jnp.inf)
        _, experts = jax.lax.top_k(jax.lax.stop_gradient(choice), top_k)
        weights = jnp.take_along_axis(scores, experts, axis=-1)
        if normalize:
            weights = weights / (jnp.sum(weights, axis=-1, keepdims=True) + 1e-20)
    else:
        raise ValueError(f"`scoring` must be 'softmax' or 'sigmoid', got {scoring!r}.")
    if scale != 1.0:
        weights = weights * scale
    return weights, experts.astype(jnp.int32)
