"""megablox inside a ``shard_map`` that checks varying axes (``check_vma=True``, the default).

A mixture-of-experts layer runs its experts under such a ``shard_map``. There every array's
type says over which manual mesh axes it varies, and a Pallas call must give its output's:
megablox's ``pallas_call`` gives none, and JAX refuses it. So here the Pallas calls run in a
nested ``shard_map`` over no further axes with that check off, and their results are typed as
varying over the inputs' axes, which they do. A ``custom_vjp`` of its own (the same products
as megablox's ``custom_vjp``: ``gmm`` with ``rhs`` transposed for ``lhs``'s gradient, ``tgmm``
for ``rhs``'s) keeps autodiff away from that typing: the caller makes every input vary over the
same axes first, so that autodiff sums ``rhs``'s gradient over the devices that share it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import jax
from jax.experimental.pallas.ops.tpu.megablox import ops
from jax.sharding import PartitionSpec as P

from ._policy import Tiling

# megablox's Pallas calls themselves (`ops` wraps them in its custom_vjp).
_kernels = ops.backend

Axes = tuple[str, ...]


def varying_axes(*arrays: jax.Array) -> Axes:
    """The manual mesh axes any of ``arrays`` varies over (``()`` outside ``shard_map``)."""
    axes: set[str] = set()
    for x in arrays:
        axes |= set(jax.typeof(x).manual_axis_type.varying)
    return tuple(sorted(axes))


def vary(x: jax.Array, axes: Axes) -> jax.Array:
    """``x`` typed as varying over ``axes`` (those it does not vary over already)."""
    missing = tuple(a for a in axes if a not in jax.typeof(x).manual_axis_type.varying)
    return jax.lax.pcast(x, missing, to="varying") if missing else x


def _unchecked(fn: Callable[..., jax.Array], axes: Axes, *args: jax.Array) -> jax.Array:
    """``fn(*args)`` with the varying-axes check off, its result typed as varying over
    ``axes`` (it is computed from inputs that vary over them)."""
    run = jax.shard_map(
        fn, in_specs=(P(),) * len(args), out_specs=P(), axis_names=set(), check_vma=False
    )
    return vary(run(*args), axes)


@functools.partial(jax.custom_vjp, nondiff_argnums=(3, 4, 5))
def gmm_varying(
    lhs: jax.Array, rhs: jax.Array, sizes: jax.Array, tiling: Tiling, interpret: Any, axes: Axes
) -> jax.Array:
    """megablox's ``gmm`` on inputs that all vary over ``axes``: ``[M, K] x [G, K, N]``."""

    def forward(a: jax.Array, b: jax.Array, s: jax.Array) -> jax.Array:
        return _kernels.gmm(
            a, b, s, a.dtype, tiling.as_tuple(), None, None, False, interpret=interpret
        )

    return _unchecked(forward, axes, lhs, rhs, sizes)


def _fwd(
    lhs: jax.Array, rhs: jax.Array, sizes: jax.Array, tiling: Tiling, interpret: Any, axes: Axes
) -> tuple[jax.Array, tuple[jax.Array, jax.Array, jax.Array]]:
    return gmm_varying(lhs, rhs, sizes, tiling, interpret, axes), (lhs, rhs, sizes)


def _bwd(
    tiling: Tiling,
    interpret: Any,
    axes: Axes,
    res: tuple[jax.Array, jax.Array, jax.Array],
    g: jax.Array,
) -> tuple[jax.Array, jax.Array, None]:
    lhs, rhs, sizes = res
    tiles = tiling.as_tuple()

    def d_lhs(g: jax.Array, b: jax.Array, s: jax.Array) -> jax.Array:
        # Each row's cotangent times its group's matrix, transposed.
        return _kernels.gmm(g, b, s, lhs.dtype, tiles, None, None, True, interpret=interpret)

    def d_rhs(a_t: jax.Array, g: jax.Array, s: jax.Array) -> jax.Array:
        # Per group: its rows of lhs, transposed, times their cotangents.
        groups = rhs.shape[0]
        return _kernels.tgmm(a_t, g, s, rhs.dtype, tiles, None, groups, interpret=interpret)

    dlhs = _unchecked(d_lhs, axes, g, rhs, sizes)
    drhs = _unchecked(d_rhs, axes, lhs.swapaxes(0, 1), g, sizes)
    return dlhs, drhs, None


gmm_varying.defvjp(_fwd, _bwd)
