"""Grouped-matmul calls the contract rejects, with the word each error message must contain."""

from __future__ import annotations

import jax.numpy as jnp

from ...testing import BadInput


def bad_inputs() -> list[BadInput]:
    """The rejected calls (built lazily: they allocate small arrays)."""
    lhs, rhs = jnp.zeros((8, 4), jnp.float32), jnp.zeros((2, 4, 6), jnp.float32)
    sizes = jnp.asarray([3, 5], jnp.int32)
    return [
        BadInput("rank-1-lhs", (lhs[0], rhs, sizes), {}, "lhs"),
        BadInput("rank-2-rhs", (lhs, rhs[0], sizes), {}, "rhs"),
        BadInput("k-mismatch", (lhs, jnp.zeros((2, 5, 6)), sizes), {}, "K"),
        BadInput("integer-lhs", (lhs.astype(jnp.int32), rhs, sizes), {}, "floating"),
        BadInput("float-group-sizes", (lhs, rhs, sizes.astype(jnp.float32)), {}, "group_sizes"),
        BadInput("group-sizes-length", (lhs, rhs, sizes[:1]), {}, "group_sizes"),
        BadInput("empty-k", (lhs[:, :0], rhs[:, :0], sizes), {}, "empty"),
        BadInput(
            "unknown-implementation",
            (lhs, rhs, sizes),
            {"implementation": "no_such_kernel"},
            "known kernels",
        ),
    ]
