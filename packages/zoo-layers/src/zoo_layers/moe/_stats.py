"""``RouterStats``: what a router decided, summed over tokens, for the losses and the metrics."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float


class RouterStats(eqx.Module):
    """Sums over the counted tokens of one MoE layer (``[E]`` fields), or of ``L`` layers stacked
    (``[L, E]``; ``[L]`` scalars).

    Attributes:
        counts: top-k assignments per expert.
        probs: router softmax probabilities per expert.
        z: ``logsumexp(router logits)²``.
        tokens: tokens counted (those the mask keeps).
        logits: the router logits ``[*B, E]`` (``[L, *B, E]`` stacked) when asked for, else
            ``None``.
    """

    counts: Float[Array, "*L E"]
    probs: Float[Array, "*L E"]
    z: Float[Array, "*L"]
    tokens: Float[Array, "*L"]
    logits: Float[Array, "*L N E"] | None = None

    @classmethod
    def of(
        cls,
        logits: Float[Array, "N E"],
        experts: Array,
        mask: Float[Array, " N"],
        *,
        keep_logits: bool = False,
    ) -> RouterStats:
        """The sums of one layer's ``logits`` and chosen ``experts`` ``[N, k]`` over the tokens
        where ``mask`` is 1."""
        logits32 = logits.astype(jnp.float32)
        n_experts = logits.shape[-1]
        chosen = jnp.sum(jax.nn.one_hot(experts, n_experts, dtype=jnp.float32), axis=-2)
        probs = jax.nn.softmax(logits32, axis=-1)
        lse = jax.nn.logsumexp(logits32, axis=-1)
        return cls(
            counts=jax.lax.stop_gradient(mask @ chosen),
            probs=mask @ probs,
            z=jnp.sum(mask * jnp.square(lse)),
            tokens=jnp.sum(mask),
            logits=logits if keep_logits else None,
        )

    @property
    def num_experts(self) -> int:
        return self.counts.shape[-1]

    def aux_loss(self) -> Float[Array, ""]:
        """The load-balancing loss as ``transformers`` computes it over all the layers
        (``load_balancing_loss_func``): ``E * sum_e f_e * p_e``, with ``f_e`` the assignments to
        expert ``e`` and ``p_e`` its probability mass, each summed over layers and tokens and
        divided by layers x tokens. ``top_k`` when the load is even."""
        total = jnp.maximum(jnp.sum(self.tokens), 1.0)
        counts = jnp.reshape(self.counts, (-1, self.num_experts)).sum(0)
        probs = jnp.reshape(self.probs, (-1, self.num_experts)).sum(0)
        return self.num_experts * jnp.sum((counts / total) * (probs / total))

    def z_loss(self) -> Float[Array, ""]:
        """The router z-loss (ST-MoE): ``logsumexp(logits)²`` averaged over tokens and layers."""
        return jnp.sum(self.z) / jnp.maximum(jnp.sum(self.tokens), 1.0)

    def load(self) -> Float[Array, "*L E"]:
        """Each expert's share of the assignments of its layer (``1 / E`` each when even)."""
        return self.counts / jnp.maximum(jnp.sum(self.counts, axis=-1, keepdims=True), 1.0)
