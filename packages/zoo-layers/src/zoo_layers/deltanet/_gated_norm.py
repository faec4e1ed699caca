"""``GatedRMSNorm``: the norm a gated DeltaNet applies to each head's output, gated by ``z``."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from .._logical import HEAD_DIM, with_names


class GatedRMSNorm(eqx.Module):
    """``rmsnorm(x) * weight * silu(z)`` over the last axis, in float32, cast back to ``x``'s
    dtype (transformers' ``Qwen3_5RMSNormGated``: the weight starts at one, no unit offset)."""

    weight: Float[Array, " D"]
    eps: float = eqx.field(static=True)

    def __init__(self, dim: int, *, eps: float = 1e-6, dtype: str = "float32") -> None:
        self.weight = jnp.ones((dim,), dtype)
        self.eps = float(eps)

    def logical_axes(self) -> GatedRMSNorm:
        """This norm with ``weight`` replaced by its logical name (each head's width)."""
        return with_names(self, weight=(HEAD_DIM,))

    def __call__(self, x: Float[Array, "*B D"], z: Float[Array, "*B D"]) -> Float[Array, "*B D"]:
        h = x.astype(jnp.float32)
        h = h * jax.lax.rsqrt(jnp.mean(h * h, axis=-1, keepdims=True) + self.eps)
        h = h * self.weight.astype(jnp.float32) * jax.nn.silu(z.astype(jnp.float32))
        return h.astype(x.dtype)
