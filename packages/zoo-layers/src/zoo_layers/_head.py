"""``OutputHead``: a language model's output projection, as the loss sees it.

A model hands its final hidden states and its head to the loss instead of logits
(``Transformer.hidden_and_head``), and the loss asks the head for each token's cross entropy
and log normaliser: the fused linear cross-entropy contract of zoo-attention, whose kernels
never hold the ``[B, T, V]`` logits. The head is the weight as stored (a ``Linear`` weight or
a tied embedding table, both ``[V, D]``), never a transposed copy.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, Int

from zoo_attention import cross_entropy

from ._logical import BATCH, SEQUENCE, logical_constraint

#: Tokens whose logits :meth:`OutputHead.greedy` and :meth:`OutputHead.entropy` hold at a time.
GREEDY_TOKENS = 256


class OutputHead(eqx.Module):
    """The output projection ``logits = cap(hidden @ weight.T)``.

    Attributes:
        weight: ``[V, D]``: the head's ``Linear`` weight, or the embedding table when tied.
        soft_cap: Gemma's final logit soft cap ``c`` (``c * tanh(logits / c)``), or ``None``.
    """

    weight: Float[Array, "V D"]
    soft_cap: float | None = eqx.field(static=True, default=None)

    def logits(
        self, hidden: Float[Array, "*B D"], *, temperature: float = 1.0
    ) -> Float[Array, "*B V"]:
        """Float32 logits, divided by ``temperature`` (the contract's reference computation)."""
        return cross_entropy.head_logits(
            hidden,
            self.weight,
            head_layout="vd",
            soft_cap=self.soft_cap,
            temperature=temperature,
        )

    def cross_entropy(
        self,
        hidden: Float[Array, "*B D"],
        targets: Int[Array, "*B"],
        *,
        loss_mask: Array | None = None,
        temperature: float = 1.0,
    ) -> tuple[Float[Array, "*B"], Float[Array, "*B"]]:
        """Each token's float32 cross entropy and ``log Z`` through the contract
        (:func:`zoo_attention.cross_entropy.linear_cross_entropy`): the kernel the platform's
        default order or ``ZOO_CROSS_ENTROPY`` picks. Zero where ``loss_mask`` is 0; the logits
        divided by ``temperature`` (after the soft cap)."""
        if hidden.ndim == 3:
            hidden = logical_constraint(hidden, (BATCH, SEQUENCE, None))
        return cross_entropy.linear_cross_entropy(
            hidden,
            self.weight,
            targets,
            loss_mask=loss_mask,
            head_layout="vd",
            soft_cap=self.soft_cap,
            temperature=temperature,
        )

    def cross_entropy_loss(
        self,
        hidden: Float[Array, "*B D"],
        targets: Int[Array, "*B"],
        *,
        weights: Array | None = None,
        z_loss: float = 0.0,
    ) -> tuple[Float[Array, ""], dict[str, Float[Array, ""]]]:
        """The summed loss ``Σ w · (ce + z_loss · log_z²)`` through the contract
        (:func:`zoo_attention.cross_entropy.linear_cross_entropy_loss`), whose fused kernel
        computes the gradients in the forward pass. ``weights`` (``*B``): each token's weight
        (the loss mask; 0: it does not count), ``None`` for all 1.

        Returns ``(loss_sum, metrics)``: ``metrics["ce"]`` is ``Σ w ce`` and
        ``metrics["log_z_squared"]`` ``Σ w log_z²``, without gradients."""
        if hidden.ndim == 3:
            hidden = logical_constraint(hidden, (BATCH, SEQUENCE, None))
        return cross_entropy.linear_cross_entropy_loss(
            hidden,
            self.weight,
            targets,
            weights,
            z_loss=z_loss,
            head_layout="vd",
            soft_cap=self.soft_cap,
        )

    def greedy(self, hidden: Float[Array, "*B D"]) -> Int[Array, "*B"]:
        """The argmax token of each position, :data:`GREEDY_TOKENS` tokens' logits at a time
        (forward only: what greedy decoding would emit)."""
        lead = hidden.shape[:-1]
        flat = hidden.reshape(-1, hidden.shape[-1])
        ids = jax.lax.map(
            lambda h: jnp.argmax(self.logits(h), axis=-1).astype(jnp.int32),
            flat,
            batch_size=GREEDY_TOKENS,
        )
        return ids.reshape(lead)

    def entropy(
        self, hidden: Float[Array, "*B D"], *, temperature: float = 1.0
    ) -> Float[Array, "*B"]:
        """Each position's float32 softmax entropy at ``temperature``, :data:`GREEDY_TOKENS`
        tokens' logits at a time, with no gradient (a metric: GRPO reports it)."""
        lead = hidden.shape[:-1]
        flat = jax.lax.stop_gradient(hidden.reshape(-1, hidden.shape[-1]))
        head = jax.lax.stop_gradient(self)

        def one(h: Array) -> Array:
            logits = head.logits(h, temperature=temperature)
            probs = jax.nn.softmax(logits, axis=-1)
            return jax.nn.logsumexp(logits, axis=-1) - jnp.sum(probs * logits, axis=-1)

        return jax.lax.map(one, flat, batch_size=GREEDY_TOKENS).reshape(lead)
