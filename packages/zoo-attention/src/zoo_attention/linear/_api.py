"""``gated_delta_rule``: the one entry point a linear-attention layer calls."""

from __future__ import annotations

import dataclasses
import math

import jax
from jax.sharding import PartitionSpec as P

from .._partition import current_partition_axes, free_axes, plan_axes, spec_entry
from .._target import active_mesh, input_mesh
from ._kernel import LinearAttentionKernel
from ._registry import get_kernel, resolve
from ._spec import LinearAttentionSpec, make_spec


def scope_name(kernel: str, version: str) -> str:
    """The ``jax.named_scope`` a linear-attention kernel call runs in, visible in profiles and
    HLO metadata (``zoo_attention.linear_attention.chunked_xla-1.3.0``)."""
    return f"zoo_attention.linear_attention.{kernel}-{version}"


@dataclasses.dataclass(frozen=True)
class _HeadCounts:
    batch: int
    num_heads: int
    num_kv_heads: int


def _call(
    kernel: LinearAttentionKernel,
    query: jax.Array,
    key: jax.Array,
    value: jax.Array,
    log_decay: jax.Array,
    beta: jax.Array,
    ids: jax.Array | None,
    initial: jax.Array | None,
    spec: LinearAttentionSpec,
) -> tuple[jax.Array, jax.Array]:
    """Call ``kernel``; under ``shard_map`` over the batch and head axes when XLA cannot
    partition it and a mesh with free axes is active (rows and heads are independent)."""
    mesh = None if kernel.partitionable else active_mesh() or input_mesh(query, key, value)
    free = {} if mesh is None else free_axes(mesh)
    if mesh is None or math.prod(free.values()) <= 1:
        return kernel(query, key, value, log_decay, beta, ids, initial, spec)
    # The value heads play the query heads' part and the query/key heads the key/value heads'
    # (value head n reads query/key head n // group), so attention's plan fits as it is.
    counts = _HeadCounts(spec.batch, spec.num_heads, spec.num_qk_heads)
    batch, heads = plan_axes(counts, free, current_partition_axes())
    b_shards = math.prod(free[a] for a in batch)
    h_shards = math.prod(free[a] for a in heads)
    qk_split = spec.num_qk_heads % h_shards == 0
    local = dataclasses.replace(
        spec,
        batch=spec.batch // b_shards,
        num_heads=spec.num_heads // h_shards,
        num_qk_heads=spec.num_qk_heads // h_shards if qk_split else spec.num_qk_heads,
    )
    rows, per_head = spec_entry(batch), spec_entry(heads)
    head4 = P(rows, None, per_head, None)
    qk4 = P(rows, None, per_head if qk_split else None, None)
    head3 = P(rows, None, per_head)
    state = P(rows, per_head, None, None)

    def per_shard(
        q: jax.Array,
        k: jax.Array,
        v: jax.Array,
        g: jax.Array,
        b: jax.Array,
        i: jax.Array | None,
        s: jax.Array | None,
    ) -> tuple[jax.Array, jax.Array]:
        return kernel(q, k, v, g, b, i, s, local)

    sharded = jax.shard_map(
        per_shard,
        mesh=mesh,
        in_specs=(
            qk4,
            qk4,
            head4,
            head3,
            head3,
            None if ids is None else P(rows, None),
            None if initial is None else state,
        ),
        out_specs=(head4, state),
        axis_names=set(free),
        check_vma=False,
    )
    out: tuple[jax.Array, jax.Array] = sharded(query, key, value, log_decay, beta, ids, initial)
    return out


def gated_delta_rule(
    query: jax.Array,
    key: jax.Array,
    value: jax.Array,
    log_decay: jax.Array,
    beta: jax.Array,
    *,
    scale: float | None = None,
    normalize_qk: bool = False,
    segment_ids: jax.Array | None = None,
    initial_state: jax.Array | None = None,
    implementation: str | None = None,
) -> tuple[jax.Array, jax.Array]:
    """The gated delta rule (gated DeltaNet's linear attention) through the best available
    kernel.

    For each batch row and value head ``n``, a ``[Dk, Dv]`` state ``S`` (``initial_state``,
    else zeros) runs over the tokens::

        S = exp(g_t) * S                         # decay (S = 0 where a document starts)
        S = S + beta_t * k_t (v_t - S^T k_t)^T   # write the correction the state misses
        o_t = S^T (scale * q_t)

    with ``q_t, k_t`` query/key head ``n // (N // K)``, L2-normalised first when
    ``normalize_qk`` (``x / sqrt(sum(x**2) + 1e-6)``, as Qwen3.5 and Qwen3-Next use it). The
    recurrence runs in float32.

    Args:
        query: ``[B, T, K, Dk]``.
        key: ``[B, T, K, Dk]``.
        value: ``[B, T, N, Dv]`` with ``N % K == 0``; one dtype for the three.
        log_decay: ``g``, ``[B, T, N]``: the state is multiplied by ``exp(g)`` at each token,
            so entries must be ``<= 0`` (not checked: it is traced).
        beta: ``[B, T, N]``, the write strength (in ``(0, 1)`` for Qwen3.5: a sigmoid).
        scale: multiplies the queries; default ``1 / sqrt(Dk)``.
        normalize_qk: L2-normalise queries and keys over ``Dk`` first.
        segment_ids: int ``[B, T]``: packed documents; the state is reset to zero wherever the
            id changes from the previous token. ``initial_state`` continues the document of the
            first token.
        initial_state: ``[B, N, Dk, Dv]``, the state before the first token (generation, or the
            state passed on from an earlier piece of the sequence); default zeros.
        implementation: a kernel name (``"chunked_xla"``, ``"recurrent"``, ...); ``None`` uses
            ``ZOO_LINEAR_ATTENTION`` if set, else the target platform's default order.

    Returns:
        ``(out [B, T, N, Dv]`` in ``value``'s dtype, ``final_state [B, N, Dk, Dv]`` float32``):
        the state after the last token (of its last document), computed under the named scope
        ``zoo_attention.linear_attention.NAME-VERSION``.

    Raises:
        ValueError: a bad argument (naming it and the shapes), an unknown kernel name, or a
            named kernel that cannot serve the call (with its reason).
    """
    spec, ids, state = make_spec(
        query,
        key,
        value,
        log_decay,
        beta,
        scale=scale,
        normalize_qk=normalize_qk,
        segment_ids=segment_ids,
        initial_state=initial_state,
    )
    resolution = resolve(spec, implementation)
    kernel = get_kernel(resolution.kernel)
    with jax.named_scope(scope_name(kernel.name, kernel.version)):
        return _call(kernel, query, key, value, log_decay, beta, ids, state, spec)
