"""``Dropout``: active only when given a PRNG key."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, PRNGKeyArray


class Dropout(eqx.Module):
    """Zeroes each element with probability ``rate`` and scales the rest by ``1 / (1 - rate)``.

    Passing ``key=None`` means inference: the input is returned unchanged. Training code
    turns dropout on by passing a key.
    """

    rate: float = eqx.field(static=True)

    def __init__(self, rate: float = 0.0) -> None:
        if not 0.0 <= rate < 1.0:
            raise ValueError(f"dropout `rate` must be in [0, 1), got {rate!r}.")
        self.rate = float(rate)

    def __call__(
        self, x: Float[Array, "*S"], *, key: PRNGKeyArray | None = None
    ) -> Float[Array, "*S"]:
        if key is None or self.rate == 0.0:
            return x
        keep = jax.random.bernoulli(key, 1.0 - self.rate, x.shape)
        return jnp.where(keep, x / (1.0 - self.rate), jnp.zeros_like(x))
