"""``sharded_flash_attention``: the kernel on inputs sharded over batch and heads of a Mesh.

Attention is independent per (batch, head), so each device runs the kernel on its own shard
with no communication. Heads are split in contiguous ranges, so query head ``n`` and its
key/value head ``n // G`` land on the same device whenever the number of head shards divides
``K``; for MQA (``K == 1``) the single key/value head is replicated instead.
"""

from __future__ import annotations

from typing import Any

import jax
from jax.sharding import Mesh
from jax.sharding import PartitionSpec as P

from ._api import flash_attention
from ._policy import BlockSizes


def _axis_size(mesh: Mesh, axis: str | tuple[str, ...] | None) -> int:
    if axis is None:
        return 1
    names = (axis,) if isinstance(axis, str) else axis
    size = 1
    for name in names:
        if name not in mesh.shape:
            raise ValueError(f"mesh has no axis {name!r}; its axes are {tuple(mesh.shape)}.")
        size *= mesh.shape[name]
    return size


def sharded_flash_attention(
    query: jax.Array,
    key: jax.Array,
    value: jax.Array,
    mesh: Mesh,
    *,
    batch_axis: str | tuple[str, ...] | None = "data",
    head_axis: str | tuple[str, ...] | None = "model",
    scale: float | None = None,
    is_causal: bool = False,
    segment_ids: tuple[jax.Array, jax.Array] | None = None,
    local_window: tuple[int, int] | None = None,
    logits_soft_cap: float | None = None,
    block_sizes: BlockSizes | None = None,
    device_kind: str | None = None,
    interpret: Any = None,
) -> jax.Array:
    """:func:`flash_attention` under ``shard_map`` over ``batch_axis`` and ``head_axis``.

    Args:
        query: ``[B, T, N, H]``, sharded (or to be sharded) ``P(batch_axis, None, head_axis)``.
        key, value: ``[B, S, K, H]``, same sharding (heads replicated when ``K == 1``).
        mesh: the device mesh.
        batch_axis, head_axis: mesh axis names (or tuples of names) for B and N; ``None``
            leaves that dimension unsharded.
        device_kind: defaults to the kind of the mesh's first device, so ahead-of-time
            compilation for another generation plans blocks for that generation.
        Others: as :func:`flash_attention`.

    Returns:
        ``[B, T, N, H]`` sharded like ``query``.
    """
    b, _, n, h = query.shape
    k = key.shape[2]
    batch_shards, head_shards = _axis_size(mesh, batch_axis), _axis_size(mesh, head_axis)
    if b % batch_shards:
        raise ValueError(
            f"batch {b} is not divisible by the {batch_shards} shards of {batch_axis!r}."
        )
    if n % head_shards:
        raise ValueError(
            f"query heads {n} are not divisible by the {head_shards} shards of {head_axis!r}."
        )
    if k % head_shards and k != 1:
        raise ValueError(
            f"key/value heads {k} are not divisible by the {head_shards} shards of {head_axis!r}; "
            "use a head axis whose size divides K."
        )
    kv_head_axis = head_axis if k % head_shards == 0 else None
    if device_kind is None and interpret is None:
        device_kind = mesh.devices.flat[0].device_kind
    q_spec = P(batch_axis, None, head_axis, None)
    kv_spec = P(batch_axis, None, kv_head_axis, None)
    id_spec = P(batch_axis, None)

    def local(q: jax.Array, kk: jax.Array, v: jax.Array, ids: Any) -> jax.Array:
        return flash_attention(
            q,
            kk,
            v,
            scale=h**-0.5 if scale is None else scale,
            is_causal=is_causal,
            segment_ids=ids,
            local_window=local_window,
            logits_soft_cap=logits_soft_cap,
            block_sizes=block_sizes,
            device_kind=device_kind,
            interpret=interpret,
        )

    ids_spec = None if segment_ids is None else (id_spec, id_spec)
    fn = jax.shard_map(
        local,
        mesh=mesh,
        in_specs=(q_spec, kv_spec, kv_spec, ids_spec),
        out_specs=q_spec,
        check_vma=False,
    )
    return fn(query, key, value, segment_ids)
