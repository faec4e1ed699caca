"""``dot_product_attention``: the one entry point models call."""

from __future__ import annotations

import jax

from . import context
from ._partition import call_kernel
from ._registry import get_kernel
from ._resolve import resolve
from ._spec import make_spec, normalise_query_offset

# int [B, T], or (q_ids [B, T], kv_ids [B, S])
SegmentIds = jax.Array | tuple[jax.Array, jax.Array]


def scope_name(kernel: str, version: str) -> str:
    """The ``jax.named_scope`` a kernel call runs in, visible in profiles and HLO metadata."""
    return f"zoo_attention.{kernel}-{version}"


def dot_product_attention(
    query: jax.Array,
    key: jax.Array,
    value: jax.Array,
    *,
    scale: float | None = None,
    is_causal: bool = False,
    segment_ids: SegmentIds | None = None,
    local_window_size: int | tuple[int, int] | None = None,
    logits_soft_cap: float | None = None,
    query_offset: int | jax.Array | None = None,
    sinks: jax.Array | None = None,
    implementation: str | None = None,
) -> jax.Array:
    """Scaled dot-product attention through the best available kernel.

    Args:
        query: ``[B, T, N, H]``.
        key: ``[B, S, K, H]`` with ``N % K == 0`` (grouped-query / multi-query attention:
            query head ``n`` uses key/value head ``n // (N // K)``).
        value: ``[B, S, K, Hv]``; ``Hv`` may differ from ``H`` (contract 1.3: multi-head
            latent attention, 192 for q/k and 128 for v); the output is then ``[B, T, N, Hv]``.
        scale: multiplies the logits; default ``1 / sqrt(H)``.
        is_causal: top-left aligned causal mask, query ``i`` sees keys ``j <= i``.
        segment_ids: int ``[B, T]`` shared by queries and keys (needs ``T == S``), or a pair
            ``(q_ids [B, T], kv_ids [B, S])``; a query sees only keys with an equal id.
        local_window_size: ``w`` or ``(left, right)``: query ``i`` sees keys in
            ``[i - left, i + right]``.
        logits_soft_cap: ``c``: logits become ``c * tanh(logits / c)`` before masking.
        query_offset: (contract 1.2) the position of query row 0 for the causal and window
            rules, an int or int scalar array (keys start at 0): the queries are a block of a
            longer sequence. Kernels that cannot take it say so in ``check``.
        sinks: (contract 1.3) ``[N]`` floating, one learned logit per query head that joins
            every row's softmax denominator and nothing else (gpt-oss): the weights are
            ``exp(s_j) / (exp(sink) + sum_j exp(s_j))``. Differentiable. A row that sees no
            key still gives zeros.
        implementation: a kernel name (``"xla"``, ``"flash_tpu"``, ``"chunked"``, …); ``None``
            uses ``ZOO_ATTENTION`` if set, else the platform's default order.

    The kernel is chosen for the call's target: the active mesh's platform and device kind
    (``jax.set_mesh``, ``shard_map``), else those of the inputs' shardings, else the default
    backend's. Under a mesh, a kernel XLA cannot partition runs under ``shard_map`` over the
    batch and head axes (see :func:`partition_axes`). Self-attention whose sequence a mesh axis
    splits (``context``, or the ``sequence`` axes of :func:`partition_axes`) runs each device's
    block of queries against all-gathered keys and values, through any kernel that takes a
    query offset (:mod:`zoo_attention.context`).

    Returns:
        ``[B, T, N, Hv]`` in the dtype of ``query``. A query that sees no key gives zeros.

    Raises:
        ValueError: a bad argument (naming it and the shapes), an unknown kernel name, or a
            named kernel that cannot serve the call (with its reason).
    """
    spec, ids = make_spec(
        query,
        key,
        value,
        scale=scale,
        is_causal=is_causal,
        segment_ids=segment_ids,
        local_window_size=local_window_size,
        logits_soft_cap=logits_soft_cap,
        query_offset=query_offset,
        sinks=sinks,
    )
    offset = normalise_query_offset(query_offset)
    plan = context.sequence_plan(spec, query, key, value)
    resolution = resolve(spec if plan is None else plan.local, implementation)
    kernel = get_kernel(resolution.kernel)
    with jax.named_scope(scope_name(kernel.name, kernel.version)):
        if plan is not None:
            return context.sequence_sharded_call(
                kernel, query, key, value, ids, plan, offset, sinks=sinks
            )
        return call_kernel(kernel, query, key, value, ids, spec, offset, sinks=sinks)
