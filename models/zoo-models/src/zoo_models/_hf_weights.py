"""Tensor names and layouts: the vocabulary of the rules that tie Hugging Face checkpoint
tensors to :class:`Transformer` leaves. Each family declares its own rules (see
:mod:`zoo_models.families`).

A :class:`Rule` ties one or more Hugging Face tensors to one or more model leaves, with the
transform each way (identity for ``nn.Linear``, a transpose for GPT-2's ``Conv1D``, a split /
concat for GPT-2's fused ``c_attn``). Model leaves are named by their attribute path, e.g.
``embed.weight`` or, for layer rules, the path inside one block, e.g. ``attn.q_proj.weight``.
Transforms use ``jax.numpy`` so expected shapes come from ``jax.eval_shape`` without allocating.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array

__all__ = ["IGNORABLE", "Rule", "Transform", "array_module", "one", "same", "transpose"]

Transform = Callable[[Sequence[Array]], list[Array]]


def same(xs: Sequence[Array]) -> list[Array]:
    """The identity transform: the tensor is the leaf."""
    return list(xs)


def transpose(xs: Sequence[Array]) -> list[Array]:
    """The transpose (GPT-2's ``Conv1D`` stores ``[in, out]``): its own inverse."""
    return [x.T for x in xs]


@dataclasses.dataclass(frozen=True)
class Rule:
    """Hugging Face tensors ``hf`` ↔ model leaves ``ours``.

    Attributes:
        hf: tensor names; in layer rules ``{i}`` stands for the layer index.
        ours: leaf paths (block-relative in layer rules).
        to_ours: Hugging Face arrays (in ``hf`` order) → model arrays (in ``ours`` order).
        to_hf: the inverse.
    """

    hf: tuple[str, ...]
    ours: tuple[str, ...]
    to_ours: Transform = same
    to_hf: Transform = same

    def names(self, layer: int | None = None) -> tuple[str, ...]:
        """The Hugging Face names, for layer ``layer`` in a layer rule."""
        return tuple(n.format(i=layer) for n in self.hf)


def one(hf: str, ours: str, transform: Transform = same) -> Rule:
    """One tensor ↔ one leaf, through ``transform`` each way (it must be its own inverse, as
    the identity and the transpose are)."""
    return Rule((hf,), (ours,), transform, transform)


def array_module(xs: Sequence[Any]) -> Any:
    """``numpy`` for host arrays (checkpoints are assembled on the host, then placed once),
    ``jax.numpy`` when any of ``xs`` is a device array or a tracer."""
    return jnp if any(isinstance(x, jax.Array) for x in xs) else np


#: Tensors some checkpoints carry that hold no parameters, whatever their family: GPT-2's
#: causal-mask buffers and old Llama rotary tables.
IGNORABLE = (
    r"(transformer\.)?h\.\d+\.attn\.(masked_)?bias",
    r"model\.layers\.\d+\.self_attn\.rotary_emb\.inv_freq",
)
