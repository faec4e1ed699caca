"""``Linear``: a dense projection with an optional bias."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, PRNGKeyArray

from ._logical import Name, with_names


class Linear(eqx.Module):
    """``y = x @ weight.T + bias``, computed in the dtype of ``x``.

    ``weight`` is ``[out_features, in_features]`` (the PyTorch ``nn.Linear`` layout); the
    parameters are cast to the input dtype at use, so they can stay float32. ``axes`` are the
    logical names of ``(out, in)`` (see :func:`zoo_layers.logical_axes`).
    """

    weight: Float[Array, "O I"]
    bias: Float[Array, " O"] | None
    in_features: int = eqx.field(static=True)
    out_features: int = eqx.field(static=True)
    axes: tuple[Name, Name] = eqx.field(static=True, default=(None, None))

    def __init__(
        self,
        in_features: int,
        out_features: int,
        *,
        use_bias: bool = False,
        init_std: float | None = None,
        dtype: jnp.dtype | str = "float32",
        axes: tuple[Name, Name] = (None, None),
        key: PRNGKeyArray,
    ) -> None:
        """Normal init with ``init_std`` (default ``1/sqrt(in_features)``); zero bias."""
        if in_features <= 0 or out_features <= 0:
            raise ValueError(
                f"`in_features` and `out_features` must be positive, got {in_features}, {out_features}."
            )
        std = in_features**-0.5 if init_std is None else init_std
        self.weight = std * jax.random.normal(key, (out_features, in_features), dtype)
        self.bias = jnp.zeros((out_features,), dtype) if use_bias else None
        self.in_features = in_features
        self.out_features = out_features
        self.axes = (axes[0], axes[1])

    def logical_axes(self) -> Linear:
        """This layer with ``weight`` and ``bias`` replaced by their logical axis names."""
        return with_names(self, weight=self.axes, bias=self.axes[:1])

    def __call__(self, x: Float[Array, "*B I"]) -> Float[Array, "*B O"]:
        bias = None if self.bias is None else self.bias.astype(x.dtype)
        return dense(x, self.weight.astype(x.dtype), bias)


def dense(
    x: Float[Array, "*B I"],
    weight: Float[Array, "O I"],
    bias: Float[Array, " O"] | None = None,
    *,
    out_dtype: jnp.dtype | None = None,
) -> Float[Array, "*B O"]:
    """``x @ weight.T + bias`` as one 2-D matmul over the flattened leading axes of ``x``.

    Flattening matters for the backward pass on CPU: the weight gradient then contracts a
    single token axis, which XLA:CPU runs as a plain GEMM, and the bias gradient is a 2-D
    column sum. Contracting ``[B, T]`` together makes XLA materialise a transposed copy of the
    output gradient, into which it fuses the whole chain of residual-stream additions of the
    layers above (measured: a third of a 4-layer train step), and reduce ``[B, T]`` through a
    slow windowed reduction.
    """
    lead = x.shape[:-1]
    y = jax.lax.dot_general(
        x.reshape(-1, x.shape[-1]),
        weight,
        (((1,), (1,)), ((), ())),
        preferred_element_type=out_dtype,
    )
    if bias is not None:
        y = y + bias.astype(y.dtype)
    return y.reshape(*lead, weight.shape[0])
