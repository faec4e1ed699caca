"""``Embedding``: a token (or position) lookup table that can also act as a tied output head."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, Int, PRNGKeyArray

from ._linear import dense


class Embedding(eqx.Module):
    """A ``[num_embeddings, dim]`` table."""

    weight: Float[Array, "V D"]
    num_embeddings: int = eqx.field(static=True)
    dim: int = eqx.field(static=True)

    def __init__(
        self,
        num_embeddings: int,
        dim: int,
        *,
        init_std: float = 0.02,
        dtype: jnp.dtype | str = "float32",
        key: PRNGKeyArray,
    ) -> None:
        if num_embeddings <= 0 or dim <= 0:
            raise ValueError(
                f"`num_embeddings` and `dim` must be positive, got {num_embeddings}, {dim}."
            )
        self.weight = init_std * jax.random.normal(key, (num_embeddings, dim), dtype)
        self.num_embeddings = num_embeddings
        self.dim = dim

    def __call__(
        self, ids: Int[Array, "*B"], *, dtype: jnp.dtype | str | None = None
    ) -> Float[Array, "*B D"]:
        """Rows of the table for ``ids``, cast to ``dtype`` (default: the table's dtype)."""
        out = jnp.take(self.weight, ids, axis=0)
        return out if dtype is None else out.astype(dtype)

    def attend(self, x: Float[Array, "*B D"]) -> Float[Array, "*B V"]:
        """``x @ weight.T`` in float32: the tied output projection (logits over the table)."""
        return dense(x, self.weight.astype(x.dtype), out_dtype=jnp.float32)
