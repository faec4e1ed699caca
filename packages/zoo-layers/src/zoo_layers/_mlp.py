"""``MLP``: the feed-forward block, plain (``down(act(up(x)))``) or gated (``down(act(gate(x)) * up(x))``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

import equinox as eqx
import jax
from jaxtyping import Array, Float, PRNGKeyArray

from ._linear import Linear
from ._logical import EMBED, MLP_AXIS

Activation = Literal["gelu", "gelu_tanh", "silu", "relu"]

_ACTIVATIONS: dict[str, Callable[[jax.Array], jax.Array]] = {
    "gelu": lambda x: jax.nn.gelu(x, approximate=False),
    "gelu_tanh": lambda x: jax.nn.gelu(x, approximate=True),
    "silu": jax.nn.silu,
    "relu": jax.nn.relu,
}


def activation_fn(name: str) -> Callable[[jax.Array], jax.Array]:
    """The activation called ``name`` (``gelu``, ``gelu_tanh``, ``silu``, ``relu``)."""
    try:
        return _ACTIVATIONS[name]
    except KeyError:
        raise ValueError(
            f"unknown activation {name!r}; choose one of {', '.join(_ACTIVATIONS)}."
        ) from None


class MLP(eqx.Module):
    """Feed-forward block over the last axis: ``[*B, D] -> [*B, D]``.

    ``gelu_tanh`` is GPT-2's ``gelu_new`` and Gemma's ``gelu_pytorch_tanh``; ``silu`` gated is
    Llama's SwiGLU.
    """

    up: Linear
    down: Linear
    gate: Linear | None
    activation: str = eqx.field(static=True)

    def __init__(
        self,
        dim: int,
        hidden: int,
        *,
        activation: str = "gelu_tanh",
        gated: bool = False,
        use_bias: bool = False,
        init_std: float | None = None,
        out_init_std: float | None = None,
        dtype: str = "float32",
        key: PRNGKeyArray,
    ) -> None:
        activation_fn(activation)
        k_up, k_down, k_gate = jax.random.split(key, 3)
        up_axes = (MLP_AXIS, EMBED)
        self.up = Linear(
            dim, hidden, use_bias=use_bias, init_std=init_std, dtype=dtype, axes=up_axes, key=k_up
        )
        self.down = Linear(
            hidden,
            dim,
            use_bias=use_bias,
            init_std=init_std if out_init_std is None else out_init_std,
            dtype=dtype,
            axes=(EMBED, MLP_AXIS),
            key=k_down,
        )
        self.gate = (
            Linear(
                dim,
                hidden,
                use_bias=use_bias,
                init_std=init_std,
                dtype=dtype,
                axes=up_axes,
                key=k_gate,
            )
            if gated
            else None
        )
        self.activation = activation

    def __call__(self, x: Float[Array, "*B D"]) -> Float[Array, "*B D"]:
        act = activation_fn(self.activation)
        h = act(self.gate(x)) * self.up(x) if self.gate is not None else act(self.up(x))
        return self.down(h)
