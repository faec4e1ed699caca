"""Which arrays of a model a gradient step moves: every floating-point array, except those a
module declares as updated otherwise (``frozen_fields``: DeepSeek-V3's router correction bias,
moved by the experts' load, never by a gradient or an optimizer's weight decay)."""

from __future__ import annotations

from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import PyTree


def _floating(x: Any) -> bool:
    if isinstance(x, jax.ShapeDtypeStruct):
        return bool(jnp.issubdtype(x.dtype, jnp.inexact))
    return eqx.is_inexact_array(x)


def _declares(x: Any) -> bool:
    return isinstance(x, eqx.Module) and bool(getattr(type(x), "frozen_fields", ()))


def _module_mask(module: eqx.Module) -> PyTree[bool]:
    mask = jax.tree.map(_floating, module)
    declared: tuple[str, ...] = getattr(type(module), "frozen_fields", ())
    fields = [f for f in declared if getattr(module, f) is not None]
    if not fields:
        return mask
    return eqx.tree_at(
        lambda m: [getattr(m, f) for f in fields], mask, replace=[False] * len(fields)
    )


def trainable_mask(tree: PyTree) -> PyTree[bool]:
    """``tree`` (concrete or abstract, ``jax.ShapeDtypeStruct`` leaves) as booleans: ``True``
    for a floating-point array an optimizer should own, ``False`` for any other leaf and for
    the fields of modules that list them in a ``frozen_fields`` class attribute. An
    ``eqx.partition`` filter."""
    return jax.tree.map(
        lambda node: _module_mask(node) if _declares(node) else _floating(node),
        tree,
        is_leaf=_declares,
    )
