"""The state's arrays in a fixed order, and a checksum per array to verify them on restore."""

from __future__ import annotations

from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .._state import TrainState
from ..parallel import is_array_like


def _bits(x: jax.Array) -> jax.Array:
    x = jnp.ravel(x)
    if x.dtype == jnp.bool_:
        return x.astype(jnp.uint32)
    size = x.dtype.itemsize
    if size == 4:
        return jax.lax.bitcast_convert_type(x, jnp.uint32)
    if size == 8:
        return jnp.ravel(jax.lax.bitcast_convert_type(x, jnp.uint32))
    narrow = {2: jnp.uint16, 1: jnp.uint8}[size]
    return jax.lax.bitcast_convert_type(x, narrow).astype(jnp.uint32)


@jax.jit
def _fingerprints(leaves: list[jax.Array]) -> list[jax.Array]:
    # A position-sensitive checksum that wraps mod 2**32: catches zero-filled or shuffled chunks.
    out = []
    for x in leaves:
        b = _bits(x)
        idx = jnp.arange(b.shape[0], dtype=jnp.uint32)
        out.append(jnp.sum((b * jnp.uint32(0x9E3779B1)) ^ (idx * jnp.uint32(0x85EBCA77) + 1)))
    return out


@jax.jit
def fresh_copies(leaves: list[jax.Array]) -> list[jax.Array]:
    """Fresh buffers for the background writer: the train step donates the live ones."""
    return [jnp.copy(x) for x in leaves]


def fingerprints(leaves: list[jax.Array]) -> list[int]:
    """One uint32 checksum per array (as Python ints)."""
    if not leaves:
        return []
    return [int(v) for v in jax.device_get(_fingerprints(list(leaves)))]


def state_leaves(state: TrainState) -> tuple[list[jax.Array], list[str]]:
    """The state's arrays (or ``ShapeDtypeStruct``s of an abstract state) and their paths, in a
    fixed order."""
    with_path = jax.tree_util.tree_flatten_with_path(eqx.filter(state, is_array_like))[0]
    return [leaf for _, leaf in with_path], [jax.tree_util.keystr(p) for p, _ in with_path]


def describe_leaves(leaves: list[Any], names: list[str]) -> list[list[Any]]:
    """``[path, shape, dtype]`` per array, as the metadata records them."""
    return [[n, list(x.shape), str(x.dtype)] for n, x in zip(names, leaves, strict=True)]


def to_numpy_tree(tree: Any) -> Any:
    """Copy every array leaf of ``tree`` to host numpy (for exact comparisons)."""
    return jax.tree.map(lambda x: np.asarray(x) if eqx.is_array(x) else x, tree)
