"""Where ``fused_xla`` runs on a device mesh: each device its tokens and its share of the
vocabulary, under ``shard_map``, with the collectives after the tile loop, not in it.

Left to XLA's partitioner, the loop over token tiles carried the head gradient's reduction over
the token-sharding axes and the head's gathering over the axis that shards its width into every
tile (in the while loop's body: once per tile). Under ``shard_map`` each device accumulates its
own partial head gradient and one ``psum`` over the token axes follows the loop; the head is
gathered once as it enters. A vocabulary sharded over a tensor axis stays sharded: a tile's
log normaliser then combines the devices' partial statistics (one small ``all_gather`` per
tile), and the partial hidden-state gradients are summed once after the loop.

Which axes shard what comes from :func:`zoo_attention.partition_axes` (zoo-layers' axis rules
set it): the batch and sequence axes shard the tokens, the vocab axes the vocabulary, and any
other free axis that divides the tokens shards them too (a device never repeats another's work).
Without a mesh, or with no axes named, the computation is left to XLA as plain JAX.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P

from .._partition import Axes, PartitionAxes, current_partition_axes, free_axes, spec_entry
from .._target import active_mesh, input_mesh
from ._fused_policy import tile_tokens
from ._spec import CrossEntropySpec


@dataclasses.dataclass(frozen=True)
class TileMesh:
    """How one call is split over devices.

    Attributes:
        mesh: the mesh to run under ``shard_map`` on, or ``None`` (plain JAX, no collectives).
        tokens: the mesh axes that shard the tokens (the rows of ``hidden``), in order.
        vocab: the mesh axes that shard the vocabulary, in order.
        manual: every free axis of the mesh (all are manual inside the ``shard_map``).
    """

    mesh: Any | None = None
    tokens: Axes = ()
    vocab: Axes = ()
    manual: frozenset[str] = frozenset()

    def rows(self) -> P:
        """The partition spec of an array whose leading dimension is the tokens."""
        return P(spec_entry(self.tokens))

    def head(self, spec: CrossEntropySpec) -> P:
        """The partition spec of the head: its vocabulary over :attr:`vocab`."""
        vocab = spec_entry(self.vocab)
        return P(None, vocab) if spec.head_layout == "dv" else P(vocab, None)


@dataclasses.dataclass(frozen=True)
class TilePlan:
    """A call's :class:`TileMesh`, the spec one device's loop sees (its tokens and its share
    of the vocabulary; the whole call without a mesh), and that loop's tokens per tile."""

    layout: TileMesh
    local: CrossEntropySpec
    tile: int


def _divides(total: int, sizes: dict[str, int], axes: list[str], axis: str) -> bool:
    return total % (math.prod(sizes[a] for a in axes) * sizes[axis]) == 0


def _layout(spec: CrossEntropySpec, hidden: jax.Array, head: jax.Array) -> tuple[TileMesh, dict]:
    mesh = active_mesh() or input_mesh(hidden, head)
    if mesh is None:
        return TileMesh(), {}
    sizes = free_axes(mesh)
    wanted = current_partition_axes()
    if math.prod(sizes.values()) == 1 or wanted == PartitionAxes():
        return TileMesh(), {}
    # An axis of one device is left out: over the vocabulary it would add a collective to
    # every tile that combines nothing.
    tokens: list[str] = []
    vocab: list[str] = []

    def take(axis: str, into: list[str], total: int) -> None:
        free = sizes.get(axis, 1) > 1 and axis not in (*tokens, *vocab)
        if free and _divides(total, sizes, into, axis):
            into.append(axis)

    for axis in (*(wanted.batch or ()), *(wanted.sequence or ())):
        take(axis, tokens, spec.tokens)
    for axis in wanted.vocab or ():
        take(axis, vocab, spec.vocab)
    for axis in sizes:  # an axis left idle would repeat another device's work
        take(axis, tokens, spec.tokens)
    return TileMesh(mesh, tuple(tokens), tuple(vocab), frozenset(sizes)), sizes


def plan(spec: CrossEntropySpec, hidden: jax.Array, head: jax.Array) -> TilePlan:
    """Where the call runs (see the module's docstring) and its tiles."""
    layout, sizes = _layout(spec, hidden, head)
    if layout.mesh is None:
        return TilePlan(layout, spec, tile_tokens(spec))
    token_shards = math.prod(sizes[a] for a in layout.tokens)
    local = dataclasses.replace(
        spec,
        tokens=spec.tokens // token_shards,
        vocab=spec.vocab // math.prod(sizes[a] for a in layout.vocab),
        token_shards=1,
    )
    return TilePlan(layout, local, tile_tokens(local, loops=token_shards))


def sharded(layout: TileMesh, fn: Callable[..., Any], in_specs: Any, out_specs: Any) -> Any:
    """``fn`` per device under ``shard_map`` on ``layout``'s mesh, or ``fn`` itself without
    one."""
    if layout.mesh is None:
        return fn
    return jax.shard_map(
        fn,
        mesh=layout.mesh,
        in_specs=in_specs,
        out_specs=out_specs,
        axis_names=set(layout.manual),
        check_vma=False,
    )


def psum(x: Any, axes: Axes) -> Any:
    """``lax.psum`` over ``axes``; the identity over none."""
    return jax.lax.psum(x, axes) if axes else x


def vocab_offset(axes: Axes, local_vocab: int) -> jax.Array:
    """The first vocabulary id of this device's share (0 when the vocabulary is whole)."""
    if not axes:
        return jnp.zeros((), jnp.int32)
    return jax.lax.axis_index(axes).astype(jnp.int32) * local_vocab
