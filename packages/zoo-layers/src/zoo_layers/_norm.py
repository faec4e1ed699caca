"""``LayerNorm`` and ``RMSNorm``; both normalise in float32 and return the input dtype."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from ._logical import NORM, Name, with_names


def _rows(x: Float[Array, "*B D"]) -> Float[Array, "N D"]:
    """``x`` as float32 rows ``[N, D]``: the weight gradients are then 2-D column sums, which
    XLA:CPU runs several times faster than a reduction over several leading axes."""
    return x.astype(jnp.float32).reshape(-1, x.shape[-1])


class LayerNorm(eqx.Module):
    """``(x - mean) / sqrt(var + eps) * weight + bias`` over the last axis."""

    weight: Float[Array, " D"]
    bias: Float[Array, " D"] | None
    eps: float = eqx.field(static=True)
    axis: Name = eqx.field(static=True, default=NORM)

    def __init__(
        self,
        dim: int,
        *,
        eps: float = 1e-5,
        use_bias: bool = True,
        dtype: str = "float32",
        axis: Name = NORM,
    ) -> None:
        self.weight = jnp.ones((dim,), dtype)
        self.bias = jnp.zeros((dim,), dtype) if use_bias else None
        self.eps = float(eps)
        self.axis = axis

    def logical_axes(self) -> LayerNorm:
        """This norm with its parameters replaced by their logical axis name."""
        return with_names(self, weight=(self.axis,), bias=(self.axis,))

    def __call__(self, x: Float[Array, "*B D"]) -> Float[Array, "*B D"]:
        h = _rows(x)
        mean = jnp.mean(h, axis=-1, keepdims=True)
        var = jnp.mean(jnp.square(h - mean), axis=-1, keepdims=True)
        h = (h - mean) * jax.lax.rsqrt(var + self.eps)
        h = h * self.weight.astype(jnp.float32)
        if self.bias is not None:
            h = h + self.bias.astype(jnp.float32)
        return h.astype(x.dtype).reshape(x.shape)


class RMSNorm(eqx.Module):
    """``x / sqrt(mean(x²) + eps) * scale`` over the last axis.

    ``scale`` is ``weight``, or ``1 + weight`` with ``unit_offset=True`` (Gemma's convention,
    where the stored weight is initialised to zero). The product with the weight is taken in
    float32 before casting back, as Gemma does.
    """

    weight: Float[Array, " D"]
    eps: float = eqx.field(static=True)
    unit_offset: bool = eqx.field(static=True)
    axis: Name = eqx.field(static=True, default=NORM)

    def __init__(
        self,
        dim: int,
        *,
        eps: float = 1e-6,
        unit_offset: bool = False,
        dtype: str = "float32",
        axis: Name = NORM,
    ) -> None:
        self.weight = (jnp.zeros if unit_offset else jnp.ones)((dim,), dtype)
        self.eps = float(eps)
        self.unit_offset = unit_offset
        self.axis = axis

    def logical_axes(self) -> RMSNorm:
        """This norm with ``weight`` replaced by its logical axis name."""
        return with_names(self, weight=(self.axis,))

    def __call__(self, x: Float[Array, "*B D"]) -> Float[Array, "*B D"]:
        h = _rows(x)
        h = h * jax.lax.rsqrt(jnp.mean(jnp.square(h), axis=-1, keepdims=True) + self.eps)
        w = self.weight.astype(jnp.float32)
        return (h * (1.0 + w if self.unit_offset else w)).astype(x.dtype).reshape(x.shape)
