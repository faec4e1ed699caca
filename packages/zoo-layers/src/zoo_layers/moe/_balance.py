"""Auxiliary-loss-free load balancing (DeepSeek-V3): after each training step, each expert's
correction bias moves by a fixed amount towards an even load, with no gradient and no loss.

The bias only shifts which experts the sigmoid router selects (their weights stay the
uncorrected scores), so an overloaded expert is chosen less often from the next step on.
"""

from __future__ import annotations

import jax.numpy as jnp
from jaxtyping import Array, Float


def balanced_correction_bias(
    bias: Float[Array, "*L E"], counts: Float[Array, "*L E"], speed: float
) -> Float[Array, "*L E"]:
    """``bias + speed * sign(mean_e(counts) - counts)``: each expert's bias, raised by ``speed``
    if it received fewer assignments than its layer's mean in the step, lowered if more (as
    DeepSeek-V3 updates its ``e_score_correction_bias``, with ``speed`` its ``gamma``)."""
    counts = counts.astype(jnp.float32)
    step = jnp.sign(jnp.mean(counts, axis=-1, keepdims=True) - counts)
    return (bias.astype(jnp.float32) + speed * step).astype(bias.dtype)
