"""``KVCache``: the decoding state of a layer stack, a plain pytree of arrays."""

from __future__ import annotations

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, Int


class KVCache(eqx.Module):
    """Keys and values of every attention layer for ``max_len`` slots, filled left to right,
    and the states of the gated DeltaNet layers, if any.

    Attributes:
        key: ``[L, B, S, K, H]`` keys (after rotary embedding) of every attention layer; for multi-head
            latent attention (:class:`zoo_layers.LatentAttention`) the latents ``[L, B, S, 1,
            R]``.
        value: ``[L, B, S, K, Hv]``; for latent attention the rotated key parts every head
            shares ``[L, B, S, 1, rope_dim]``.
        positions: ``[B, S]`` int32 position of the token held in each slot.
        valid: ``[B, S]`` whether a slot holds a real token (not padding, not yet written).
        index: int32 scalar, the number of slots written so far (the same for every row).
        conv: ``[L_lin, B, W - 1, C]``: each gated DeltaNet layer's last ``W - 1``
            convolution inputs (``None`` without such layers).
        recurrent: ``[L_lin, B, N, Dk, Dv]`` float32: each gated DeltaNet layer's state.
    """

    key: Float[Array, "L B S K H"]
    value: Float[Array, "L B S K H"]
    positions: Int[Array, "B S"]
    valid: Bool[Array, "B S"]
    index: Int[Array, ""]
    conv: Float[Array, "Ll B W1 C"] | None = None
    recurrent: Float[Array, "Ll B N Dk Dv"] | None = None

    @classmethod
    def empty(
        cls,
        n_layers: int,
        batch: int,
        max_len: int,
        n_kv_heads: int,
        head_dim: int,
        dtype: jnp.dtype | str = "float32",
        *,
        value_dim: int | None = None,
        linear_layers: int = 0,
        conv_shape: tuple[int, int] = (0, 0),
        state_shape: tuple[int, int, int] = (0, 0, 0),
    ) -> KVCache:
        """A cache with every slot empty (``value_dim``: the values' width, default
        ``head_dim``); with ``linear_layers``, zero states for that many gated DeltaNet layers
        (``conv_shape`` ``(W - 1, C)``, ``state_shape`` ``(N, Dk, Dv)``)."""
        if batch <= 0 or max_len <= 0:
            raise ValueError(f"`batch` and `max_len` must be positive, got {batch}, {max_len}.")
        shape = (n_layers, batch, max_len, n_kv_heads, head_dim)
        value_shape = (*shape[:-1], head_dim if value_dim is None else value_dim)
        linear = {}
        if linear_layers:
            linear = {
                "conv": jnp.zeros((linear_layers, batch, *conv_shape), dtype),
                "recurrent": jnp.zeros((linear_layers, batch, *state_shape), jnp.float32),
            }
        return cls(
            key=jnp.zeros(shape, dtype),
            value=jnp.zeros(value_shape, dtype),
            positions=jnp.zeros((batch, max_len), jnp.int32),
            valid=jnp.zeros((batch, max_len), bool),
            index=jnp.zeros((), jnp.int32),
            **linear,
        )

    @property
    def max_len(self) -> int:
        """Number of slots."""
        return self.key.shape[2]

    @property
    def batch(self) -> int:
        """Rows in the batch."""
        return self.key.shape[1]

    def next_positions(self) -> Int[Array, " B"]:
        """One past the largest position held by each row (0 for an empty row)."""
        return jnp.max(jnp.where(self.valid, self.positions, -1), axis=1) + 1
