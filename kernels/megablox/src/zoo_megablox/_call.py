"""``megablox_gmm``: the contract's grouped matmul on JAX's megablox kernel.

``jax.experimental.pallas.ops.tpu.megablox.gmm`` (a ``custom_vjp``: the backward pass is a
transposed ``gmm`` for ``lhs`` and ``tgmm`` for ``rhs``) needs ``M`` to be a multiple of ``tm``
and leaves the rows past the groups unwritten, in the output and in ``lhs``'s gradient. The
rows are padded to whole tiles, and the rows past the groups are selected away on both sides
of the call: after it for the output, before it for the gradient (the transpose of that select
drops the unwritten rows of ``lhs``'s gradient). A select, not a product, so unwritten memory
(NaN in interpret mode) cannot leak. Inside a ``shard_map`` that checks varying axes, the
Pallas calls run as :mod:`._varying` says.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from jax.experimental.pallas.ops.tpu.megablox import ops

from ._policy import Tiling, round_up
from ._varying import gmm_varying, vary, varying_axes


def megablox_gmm(
    lhs: jax.Array,
    rhs: jax.Array,
    group_sizes: jax.Array,
    *,
    tiling: Tiling,
    interpret: Any = False,
) -> jax.Array:
    """``out[r] = lhs[r] @ rhs[g]`` for the rows of group ``g``, zero past the groups.

    Args:
        lhs: ``[M, K]``, float32 or bfloat16, rows sorted by group.
        rhs: ``[G, K, N]`` in ``lhs``'s dtype.
        group_sizes: int32 ``[G]``, summing to at most ``M``.
        tiling: the tiles (:func:`zoo_megablox.choose_tiling`).
        interpret: ``False`` (Mosaic), ``True`` (generic interpret mode) or
            ``pltpu.InterpretParams`` (Pallas TPU interpret mode).

    Returns:
        ``[M, N]`` in ``lhs``'s dtype (accumulated in float32 inside the kernel).
    """
    m = lhs.shape[0]
    # Inside a shard_map that checks varying axes (a mixture-of-experts layer's), every input
    # varies over the same axes (see _varying).
    axes = varying_axes(lhs, rhs, group_sizes)
    lhs, rhs, group_sizes = (vary(x, axes) for x in (lhs, rhs, group_sizes))
    padded = round_up(m, tiling.tm)
    used = jnp.arange(padded, dtype=jnp.int32)[:, None] < jnp.sum(group_sizes)
    x = jnp.where(used, jnp.pad(lhs, ((0, padded - m), (0, 0))), 0)
    with jax.named_scope("zoo_megablox.gmm"):
        if axes:
            out = gmm_varying(x, rhs, group_sizes, tiling, interpret, axes)
        else:
            out = ops.gmm(
                x,
                rhs,
                group_sizes,
                lhs.dtype,
                tiling.as_tuple(),
                None,  # group_offset: every group of rhs is here
                None,  # existing_out
                False,  # transpose_rhs
                interpret,
            )
    return jnp.where(used, out, 0)[:m]
