"""Running a kernel that XLA cannot partition (a Pallas/Mosaic call) on a device mesh.

Attention is independent per (batch row, head), so such a kernel runs under ``shard_map`` over
the batch and head axes of the mesh, each device on its own shard, with no communication. Which
mesh axes shard the batch and which the heads comes from :func:`partition_axes` (zoo-train sets
it from its sharding rules); without it, each free mesh axis goes to the batch if it divides
the batch, else to the heads if it divides them, else the kernel is replicated along it. Any
choice is correct; matching the activations' layout only avoids moving data.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import math
from collections.abc import Iterator, Sequence
from typing import Any, Protocol

import jax
from jax.sharding import AxisType
from jax.sharding import PartitionSpec as P

from ._kernel import AttentionKernel, run_kernel
from ._spec import AttentionSpec
from ._target import active_mesh, input_mesh

Axes = tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class PartitionAxes:
    """Mesh axes that shard the batch, the heads and the sequence of attention inputs, and the
    vocabulary of an output head (``None``: not set), and whether the sequence is in the
    load-balanced dual-chunk order (:func:`zoo_attention.context.dual_chunk_order`)."""

    batch: Axes | None = None
    heads: Axes | None = None
    sequence: Axes | None = None
    balanced: bool = False
    vocab: Axes | None = None


_AXES: contextvars.ContextVar[PartitionAxes | None] = contextvars.ContextVar(
    "zoo_attention_partition_axes", default=None
)


def _as_axes(value: str | Sequence[str] | None) -> Axes | None:
    if value is None:
        return None
    return (value,) if isinstance(value, str) else tuple(value)


@contextlib.contextmanager
def partition_axes(
    *,
    batch: str | Sequence[str] | None = None,
    heads: str | Sequence[str] | None = None,
    sequence: str | Sequence[str] | None = None,
    balanced: bool = False,
    vocab: str | Sequence[str] | None = None,
) -> Iterator[PartitionAxes]:
    """Within the block, name the mesh axes that shard the attention inputs' batch, heads and
    sequence.

    A kernel that XLA cannot partition then runs under ``shard_map`` with query and output
    ``P(batch, None, heads, None)``. Axes that are not in the mesh, or do not divide the
    dimension, are left out for that call. Self-attention whose sequence the ``sequence`` axes
    split (default: an axis named ``context``) runs sequence-sharded, every kernel under
    ``shard_map`` (:mod:`zoo_attention.context`); ``balanced``: the sequence is laid out in the
    dual-chunk order (the caller permuted its data so). ``vocab``: the axes that shard an
    output head's vocabulary; the fused cross-entropy kernel ``fused_xla`` then runs under
    ``shard_map``, each device on its tokens and its share of the vocabulary.
    """
    axes = PartitionAxes(
        _as_axes(batch), _as_axes(heads), _as_axes(sequence), balanced, _as_axes(vocab)
    )
    token = _AXES.set(axes)
    try:
        yield axes
    finally:
        _AXES.reset(token)


def current_partition_axes() -> PartitionAxes:
    """The axes set by the innermost :func:`partition_axes` (fields ``None`` when unset)."""
    return _AXES.get() or PartitionAxes()


class HeadCounts(Protocol):
    """What the plan reads of a call: its rows, its query heads and the key/value heads they
    share (an :class:`AttentionSpec`, or a linear-attention call's value and query/key heads)."""

    @property
    def batch(self) -> int: ...

    @property
    def num_heads(self) -> int: ...

    @property
    def num_kv_heads(self) -> int: ...


def _heads_fit(spec: HeadCounts, shards: int) -> bool:
    # Contiguous head ranges keep query head n with its key/value head n // G when the shards
    # divide K; a single key/value head (MQA) is replicated instead.
    return spec.num_heads % shards == 0 and (
        spec.num_kv_heads % shards == 0 or spec.num_kv_heads == 1
    )


def plan_axes(spec: HeadCounts, sizes: dict[str, int], wanted: PartitionAxes) -> tuple[Axes, Axes]:
    """``(batch_axes, head_axes)`` among the free mesh axes ``sizes`` (name → size)."""
    batch: list[str] = []
    heads: list[str] = []

    def size(axes: list[str]) -> int:
        return math.prod(sizes[a] for a in axes)

    if wanted.batch is None and wanted.heads is None:
        for axis, n in sizes.items():
            if n == 1:
                continue
            if spec.batch % (size(batch) * n) == 0:
                batch.append(axis)
            elif _heads_fit(spec, size(heads) * n):
                heads.append(axis)
        return tuple(batch), tuple(heads)
    for axis in wanted.batch or ():
        if axis in sizes and spec.batch % (size(batch) * sizes[axis]) == 0:
            batch.append(axis)
    for axis in wanted.heads or ():
        if axis in sizes and axis not in batch and _heads_fit(spec, size(heads) * sizes[axis]):
            heads.append(axis)
    return tuple(batch), tuple(heads)


def spec_entry(axes: Axes) -> str | Axes | None:
    """A ``PartitionSpec`` entry for ``axes``: ``None``, one name, or a tuple."""
    if not axes:
        return None
    return axes[0] if len(axes) == 1 else axes


def free_axes(mesh: Any) -> dict[str, int]:
    """``{name: size}`` of the mesh axes not already manual (inside ``shard_map``)."""
    return {
        name: size
        for name, size, kind in zip(mesh.axis_names, mesh.axis_sizes, mesh.axis_types, strict=True)
        if kind != AxisType.Manual
    }


def shard_spec(
    spec: AttentionSpec, free: dict[str, int], batch: Axes, heads: Axes
) -> tuple[bool, AttentionSpec]:
    """``(kv_split, local)``: whether K/V heads split over ``heads`` too (else each shard keeps
    them all), and the spec one shard sees with the batch over ``batch`` and the query heads
    over ``heads``."""
    b_shards = math.prod(free[a] for a in batch)
    h_shards = math.prod(free[a] for a in heads)
    kv_split = spec.num_kv_heads % h_shards == 0
    local = dataclasses.replace(
        spec,
        batch=spec.batch // b_shards,
        num_heads=spec.num_heads // h_shards,
        num_kv_heads=spec.num_kv_heads // h_shards if kv_split else spec.num_kv_heads,
    )
    return kv_split, local


def call_kernel(
    kernel: AttentionKernel,
    query: jax.Array,
    key: jax.Array,
    value: jax.Array,
    segment_ids: tuple[jax.Array, jax.Array] | None,
    spec: AttentionSpec,
    query_offset: jax.Array | int | None = None,
    *,
    sinks: jax.Array | None = None,
) -> jax.Array:
    """Call ``kernel``, under ``shard_map`` when it cannot be partitioned and a mesh is active.

    ``query_offset`` reaches the kernel only when ``spec.has_query_offset``, ``sinks`` (split
    over the head axes like the query heads) only when ``spec.has_sinks``."""

    def call(
        q: jax.Array, k: jax.Array, v: jax.Array, ids: Any, off: Any, s: Any, sk: Any
    ) -> jax.Array:
        return run_kernel(kernel, q, k, v, ids, s, off, sk)

    if kernel.partitionable:
        return call(query, key, value, segment_ids, query_offset, spec, sinks)
    mesh = active_mesh() or input_mesh(query, key, value)
    if mesh is None:
        return call(query, key, value, segment_ids, query_offset, spec, sinks)
    free = free_axes(mesh)
    if math.prod(free.values()) == 1:
        return call(query, key, value, segment_ids, query_offset, spec, sinks)
    batch, heads = plan_axes(spec, free, current_partition_axes())
    kv_split, local = shard_spec(spec, free, batch, heads)
    q_spec = P(spec_entry(batch), None, spec_entry(heads), None)
    kv_spec = P(spec_entry(batch), None, spec_entry(heads) if kv_split else None, None)
    id_spec = P(spec_entry(batch), None)

    # A Python int offset stays static (a kernel may plan from it); an array goes in replicated.
    fixed = query_offset if isinstance(query_offset, int) else None
    traced = None if isinstance(query_offset, int) else query_offset

    def per_shard(
        q: jax.Array, k: jax.Array, v: jax.Array, ids: Any, off: Any, sk: Any
    ) -> jax.Array:
        return call(q, k, v, ids, fixed if off is None else off, local, sk)

    # Every free axis is manual inside: an axis that shards neither batch nor heads runs the
    # kernel replicated, instead of leaving XLA a Mosaic call it cannot partition.
    sharded = jax.shard_map(
        per_shard,
        mesh=mesh,
        in_specs=(
            q_spec,
            kv_spec,
            kv_spec,
            None if segment_ids is None else (id_spec, id_spec),
            None if traced is None else P(),
            None if sinks is None else P(spec_entry(heads)),
        ),
        out_specs=q_spec,
        axis_names=set(free),
        check_vma=False,
    )
    return sharded(query, key, value, segment_ids, traced, sinks)
