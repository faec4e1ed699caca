"""Attention on a sequence sharded over mesh axes: keys and values all-gathered.

Under a mesh whose sequence axes (``partition_axes(sequence=...)``, else an axis named
``context``) split the query, key and value sequences, each device holds a block of queries.
It gathers the keys and values (and their segment ids) of the whole sequence over those axes
and runs the kernel on its block, telling it the block's first position (contract 1.2's query
offset), so causal and window masks and packed documents stay global. With load balancing the
block is two chunks (:mod:`._order`), run as two kernel calls. The gather's transpose, a
reduce-scatter, sums the key and value gradients back onto their shards.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P

from .._kernel import AttentionKernel, run_kernel
from .._partition import (
    Axes,
    current_partition_axes,
    free_axes,
    plan_axes,
    shard_spec,
    spec_entry,
)
from .._spec import AttentionSpec
from .._target import active_mesh, input_mesh
from ._order import dual_chunk_chunks, from_dual_chunk

#: The mesh axis that splits sequences when :func:`zoo_attention.partition_axes` names none
#: (MaxText's name).
CONTEXT_AXIS = "context"


@dataclasses.dataclass(frozen=True)
class SequencePlan:
    """How a call runs sequence-sharded.

    Attributes:
        mesh: the mesh (abstract or concrete) the call runs on.
        sequence: the mesh axes that split the sequence; ``shards`` is their product.
        batch, heads: the other axes that split the batch and the heads inside the call.
        manual: every free mesh axis (the ones left over run the call replicated).
        kv_heads_split: the key/value heads are split like the query heads (else replicated:
            a single key/value head).
        balanced: the sequence is laid out in the dual-chunk order.
        local: the spec of one kernel call (one block, or one chunk when balanced).
    """

    mesh: Any
    sequence: Axes
    shards: int
    batch: Axes
    heads: Axes
    manual: frozenset[str]
    kv_heads_split: bool
    balanced: bool
    local: AttentionSpec


def sequence_plan(spec: AttentionSpec, *arrays: Any) -> SequencePlan | None:
    """The plan of a sequence-sharded call for ``spec`` on the active mesh (or the inputs'),
    or ``None`` when the call is not one: no mesh, no sequence axis larger than 1, or not
    self-attention over a length the shards divide (such a call runs as before)."""
    mesh = active_mesh() or input_mesh(*arrays)
    if mesh is None:
        return None
    free = free_axes(mesh)
    wanted = current_partition_axes()
    names = wanted.sequence if wanted.sequence is not None else (CONTEXT_AXIS,)
    sequence = tuple(a for a in names if free.get(a, 1) > 1)
    shards = math.prod(free[a] for a in sequence)
    if shards == 1 or spec.q_len != spec.kv_len:
        return None
    balanced = wanted.balanced and spec.uses_positions
    if spec.q_len % (shards * (2 if balanced else 1)):
        return None
    others = {a: n for a, n in free.items() if a not in sequence}
    batch, heads = plan_axes(spec, others, wanted)
    kv_split, local = shard_spec(spec, free, batch, heads)
    local = dataclasses.replace(
        local,
        q_len=spec.q_len // shards // (2 if balanced else 1),
        has_query_offset=spec.uses_positions,
    )
    return SequencePlan(
        mesh, sequence, shards, batch, heads, frozenset(free), kv_split, balanced, local
    )


def sequence_sharded_call(
    kernel: AttentionKernel,
    query: jax.Array,
    key: jax.Array,
    value: jax.Array,
    segment_ids: tuple[jax.Array, jax.Array] | None,
    plan: SequencePlan,
    query_offset: jax.Array | int | None = None,
    *,
    sinks: jax.Array | None = None,
) -> jax.Array:
    """Run ``kernel`` on every device's block of the sequence (see the module's docstring).

    Args:
        query: ``[B, T, N, H]``, key and value ``[B, T, K, H]``, sharded (or to be sharded)
            along ``T`` over ``plan.sequence``.
        segment_ids: ``(q_ids, kv_ids)`` int32 ``[B, T]``, or ``None``.
        plan: from :func:`sequence_plan`.
        query_offset: added to every block's offset (a caller's own), or ``None``.
        sinks: contract 1.3's ``[N]`` sink logits (split over the head axes), or ``None``.

    A kernel that takes the offset only as a Python int (``static_query_offset``) runs in one
    ``lax.switch`` branch per shard, each with its shard's offsets as constants.

    Returns:
        ``[B, T, N, H]``, sharded like ``query``.

    Raises:
        ValueError: a traced ``query_offset`` for a kernel that needs it static.
    """
    static = kernel.static_query_offset and local_needs_offset(plan)
    if static and query_offset is not None and not isinstance(query_offset, int):
        raise ValueError(
            f"kernel {kernel.name!r} takes the query offset as a Python int, got an array; "
            "pass an int or use a kernel that takes traced offsets (xla, chunked)."
        )
    fixed = query_offset if isinstance(query_offset, int) else None
    traced = None if isinstance(query_offset, int) else query_offset
    local = plan.local
    kv_heads = spec_entry(plan.heads) if plan.kv_heads_split else None
    seq = spec_entry(plan.sequence)
    q_spec = P(spec_entry(plan.batch), seq, spec_entry(plan.heads), None)
    kv_spec = P(spec_entry(plan.batch), seq, kv_heads, None)
    id_spec = P(spec_entry(plan.batch), seq)
    block = local.q_len * (2 if plan.balanced else 1)
    shards = plan.shards

    def gather(x: jax.Array) -> jax.Array:
        full = jax.lax.all_gather(x, plan.sequence, axis=1, tiled=True)
        return from_dual_chunk(full, shards) if plan.balanced else full

    def run(q: jax.Array, k: jax.Array, v: jax.Array, ids: Any, first: Any, sk: Any) -> jax.Array:
        return run_kernel(kernel, q, k, v, ids, local, first, sk)

    def attend(
        q: jax.Array, k: jax.Array, v: jax.Array, ids: Any, sk: Any, shard: Any, base: Any
    ) -> Any:
        """The shard's block; ``shard`` and ``base`` ints (static offsets) or traced."""
        if not plan.balanced:
            return run(q, k, v, ids, base + shard * block, sk)
        chunk = local.q_len
        outs = []
        for half, c in enumerate(dual_chunk_chunks(shard, shards)):
            rows = slice(half * chunk, (half + 1) * chunk)
            part_ids = None if ids is None else (ids[0][:, rows], ids[1])
            outs.append(run(q[:, rows], k, v, part_ids, base + c * chunk, sk))
        return jnp.concatenate(outs, axis=1)

    def per_shard(
        q: jax.Array, k: jax.Array, v: jax.Array, ids: Any, extra: Any, sk: Any
    ) -> jax.Array:
        k, v = gather(k), gather(v)
        if ids is not None:
            ids = (ids[0], gather(ids[1]))
        shard = jax.lax.axis_index(plan.sequence)
        base: Any = fixed or 0
        if not static:
            return attend(q, k, v, ids, sk, shard, base if extra is None else base + extra)
        branches = [
            lambda q, k, v, ids, sk, d=d: attend(q, k, v, ids, sk, d, base) for d in range(shards)
        ]
        return jax.lax.switch(shard, branches, q, k, v, ids, sk)

    sharded = jax.shard_map(
        per_shard,
        mesh=plan.mesh,
        in_specs=(
            q_spec,
            kv_spec,
            kv_spec,
            None if segment_ids is None else (id_spec, id_spec),
            None if traced is None else P(),
            None if sinks is None else P(spec_entry(plan.heads)),
        ),
        out_specs=q_spec,
        axis_names=set(plan.manual),
        check_vma=False,
    )
    return sharded(query, key, value, segment_ids, traced, sinks)


def local_needs_offset(plan: SequencePlan) -> bool:
    """Whether the plan's kernel calls take a query offset (their mask depends on positions)."""
    return plan.local.has_query_offset
