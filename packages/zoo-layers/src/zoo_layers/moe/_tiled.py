"""The portable grouped matmul: every group's rows padded to whole tiles, one tile per group.

The rows of each group are moved into a buffer in which the group starts on a tile boundary
(``T`` rows a tile), so every tile holds rows of one group only; each tile is multiplied by its
group's matrix in one batched matmul; the rows are moved back. The work is that of the rows plus
at most ``T - 1`` padding rows a group, where XLA:CPU's lowering of ``jax.lax.ragged_dot``
multiplies every row by every group. Shapes stay static: the number of tiles is the most any
split of the rows into groups can need.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, Int

#: Bounds on the rows of a tile.
MIN_TILE, MAX_TILE = 8, 512


def tile_rows(rows: int, groups: int) -> int:
    """Rows per tile for ``rows`` rows in ``groups`` groups: the largest power of two (within
    ``[MIN_TILE, MAX_TILE]``) whose padding, one tile a group at most, is an eighth of the rows."""
    tile = MIN_TILE
    while tile < MAX_TILE and 2 * tile * groups * 8 <= rows:
        tile *= 2
    return tile


def vary_like(x: Array, *others: Array) -> Array:
    """``x`` marked as varying over every manual mesh axis that ``others`` vary over (inside
    ``shard_map``; a no-op outside), so that the cotangent a custom rule computes from theirs
    has ``x``'s type (autodiff then sums it over those axes, as for any broadcast)."""
    varying = lambda a: jax.typeof(a).manual_axis_type.varying
    missing = frozenset().union(*map(varying, others)) - varying(x)
    return jax.lax.pcast(x, tuple(sorted(missing)), to="varying") if missing else x


def move_rows(x: Array, src: Array, dst: Array) -> Array:
    """``y[i] = x[src[i]]`` (zero where ``src[i]`` is out of range), for a one-to-one ``src``
    whose inverse is ``dst`` (``x[j]`` lands in ``y[dst[j]]``, or nowhere when out of range):
    the gradient is then a gather too, not a scatter."""
    return _move_rows(vary_like(x, src, dst), src, dst)


@jax.custom_vjp
def _move_rows(x: Array, src: Array, dst: Array) -> Array:
    return jnp.take(x, src, axis=0, mode="fill", fill_value=0)


def _move_fwd(x: Array, src: Array, dst: Array) -> tuple[Array, tuple[Array, Array]]:
    return _move_rows(x, src, dst), (src, dst)


def _move_bwd(res: tuple[Array, Array], g: Array) -> tuple[Array, None, None]:
    _, dst = res
    return jnp.take(g, dst, axis=0, mode="fill", fill_value=0), None, None


_move_rows.defvjp(_move_fwd, _move_bwd)


@jax.custom_vjp
def _tile_weights(rhs: Array, tile_group: Array) -> Array:
    """``rhs[tile_group]``: each tile's group matrix. Its gradient sums the tiles of each group
    with a one-hot matmul: XLA:CPU's scatter-add, the gather's own transpose, is many times
    slower at these sizes."""
    return jnp.take(rhs, tile_group, axis=0)


def _tile_fwd(rhs: Array, tile_group: Array) -> tuple[Array, tuple[Array, int]]:
    return _tile_weights(rhs, tile_group), (tile_group, rhs.shape[0])


def _tile_bwd(res: tuple[Array, int], g: Array) -> tuple[Array, None]:
    tile_group, groups = res
    one_hot = jax.nn.one_hot(tile_group, groups, dtype=g.dtype)
    return jnp.einsum("tg,tkn->gkn", one_hot, g, precision="highest"), None


_tile_weights.defvjp(_tile_fwd, _tile_bwd)


def tiled_grouped_matmul(
    lhs: Float[Array, "M K"], rhs: Float[Array, "G K N"], group_sizes: Int[Array, " G"]
) -> Float[Array, "M N"]:
    """:func:`zoo_layers.grouped_matmul` by tiles (see the module docstring)."""
    m, k = lhs.shape
    g, _, n = rhs.shape
    tile = tile_rows(m, g)
    tiles = -(-m // tile) + g
    slots = tiles * tile
    sizes = group_sizes.astype(jnp.int32)
    ends = jnp.cumsum(sizes)
    starts = ends - sizes
    padded = (sizes + tile - 1) // tile * tile
    padded_ends = jnp.cumsum(padded)
    padded_starts = padded_ends - padded
    # Where each row goes (rows past the last group go nowhere) ...
    rows = jnp.arange(m, dtype=jnp.int32)
    row_group = jnp.searchsorted(ends, rows, side="right")
    rg = jnp.minimum(row_group, g - 1)
    dst = jnp.where(row_group < g, padded_starts[rg] + rows - starts[rg], slots)
    # ... and which row each slot holds (padding holds none).
    slot = jnp.arange(slots, dtype=jnp.int32)
    slot_group = jnp.minimum(jnp.searchsorted(padded_ends, slot, side="right"), g - 1)
    offset = slot - padded_starts[slot_group]
    src = jnp.where(offset < sizes[slot_group], starts[slot_group] + offset, m)
    tile_group = slot_group[::tile]
    buffer = move_rows(lhs, src, dst).reshape(tiles, tile, k)
    out = jnp.einsum(
        "tmk,tkn->tmn",
        buffer,
        _tile_weights(vary_like(rhs, lhs, tile_group), tile_group),
        preferred_element_type=lhs.dtype,
    )
    return move_rows(out.reshape(slots, n), dst, src)
