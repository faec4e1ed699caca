"""``Embedding``: a token (or position) lookup table that can also act as a tied output head."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, Int, PRNGKeyArray

from ._linear import dense
from ._logical import BATCH, EMBED, SEQUENCE, VOCAB, Name, logical_constraint, with_names


class Embedding(eqx.Module):
    """A ``[num_embeddings, dim]`` table; ``axes`` are the logical names of its two dimensions."""

    weight: Float[Array, "V D"]
    num_embeddings: int = eqx.field(static=True)
    dim: int = eqx.field(static=True)
    axes: tuple[Name, Name] = eqx.field(static=True, default=(VOCAB, EMBED))

    def __init__(
        self,
        num_embeddings: int,
        dim: int,
        *,
        init_std: float = 0.02,
        dtype: jnp.dtype | str = "float32",
        axes: tuple[Name, Name] = (VOCAB, EMBED),
        key: PRNGKeyArray,
    ) -> None:
        if num_embeddings <= 0 or dim <= 0:
            raise ValueError(
                f"`num_embeddings` and `dim` must be positive, got {num_embeddings}, {dim}."
            )
        self.weight = init_std * jax.random.normal(key, (num_embeddings, dim), dtype)
        self.num_embeddings = num_embeddings
        self.dim = dim
        self.axes = (axes[0], axes[1])

    def logical_axes(self) -> Embedding:
        """This table with ``weight`` replaced by its logical axis names."""
        return with_names(self, weight=self.axes)

    def __call__(
        self, ids: Int[Array, "*B"], *, dtype: jnp.dtype | str | None = None
    ) -> Float[Array, "*B D"]:
        """Rows of the table for ``ids``, cast to ``dtype`` (default: the table's dtype).

        Under axis rules the lookup reads a whole table (gathered like any fully sharded
        weight) and its rows follow the batch layout of ``ids``: a lookup into a table sharded
        along the rows it indexes would otherwise move data between devices in both passes.
        """
        table = logical_constraint(self.weight, (None, None))
        out = jnp.take(table, ids, axis=0)
        out = logical_constraint(out, (BATCH, SEQUENCE) if ids.ndim == 2 else (BATCH,))
        return out if dtype is None else out.astype(dtype)

    def attend(self, x: Float[Array, "*B D"]) -> Float[Array, "*B V"]:
        """``x @ weight.T`` in float32: the tied output projection (logits over the table)."""
        return dense(x, self.weight.astype(x.dtype), out_dtype=jnp.float32)
