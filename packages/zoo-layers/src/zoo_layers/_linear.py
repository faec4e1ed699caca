"""``Linear``: a dense projection with an optional bias."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, PRNGKeyArray


class Linear(eqx.Module):
    """``y = x @ weight.T + bias``, computed in the dtype of ``x``.

    ``weight`` is ``[out_features, in_features]`` (the PyTorch ``nn.Linear`` layout); the
    parameters are cast to the input dtype at use, so they can stay float32.
    """

    weight: Float[Array, "O I"]
    bias: Float[Array, " O"] | None
    in_features: int = eqx.field(static=True)
    out_features: int = eqx.field(static=True)

    def __init__(
        self,
        in_features: int,
        out_features: int,
        *,
        use_bias: bool = False,
        init_std: float | None = None,
        dtype: jnp.dtype | str = "float32",
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

    def __call__(self, x: Float[Array, "*B I"]) -> Float[Array, "*B O"]:
        y = x @ self.weight.T.astype(x.dtype)
        if self.bias is not None:
            y = y + self.bias.astype(x.dtype)
        return y
