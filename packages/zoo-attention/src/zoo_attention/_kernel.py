"""The kernel interface every attention implementation provides."""

from __future__ import annotations

import abc
import inspect
from typing import Any, ClassVar

import jax

from ._base import Kernel
from ._spec import AttentionSpec

#: The attention contract. Its major number is this package's major version (shared with the
#: grouped-matmul contract, ``zoo_attention.grouped.GROUPED_MATMUL_CONTRACT_VERSION``).
CONTRACT_VERSION = "1.3"


class AttentionKernel(Kernel):
    """One attention implementation behind the contract.

    A kernel package exposes an instance through the entry-point group
    ``zoo.attention_kernels``; the registry fills in ``version`` from the distribution's
    metadata when the kernel does not set it.

    Attributes:
        name: the name users pass as ``implementation=`` and in ``ZOO_ATTENTION``.
        version: the version of the distribution that ships the kernel.
        contract_version: the contract version (``"MAJOR.MINOR"``) the kernel implements.
        platforms: JAX backends the kernel is meant for (``"cpu"``, ``"gpu"``, ``"tpu"``).
        priority: place in the default order on those platforms; higher is tried first.
        partitionable: whether XLA can partition the kernel's computation over a mesh (pure
            JAX kernels). ``False`` for a kernel XLA cannot partition, such as a Pallas/Mosaic
            call: the contract then runs it under ``shard_map`` over the batch and head axes of
            the mesh, so each call sees its shard's shapes (contract 1.1; 1.0 kernels are
            taken as partitionable).
        sequence_tile: the kernel serves query and key lengths in multiples of this only (a
            kernel that tiles sequences without padding, such as ``splash``: 128); the shared
            conformance cases run on it at their lengths rounded up to a multiple (contract
            1.2's test suite; 1 for every other kernel).
        static_query_offset: (contract 1.2) the kernel takes the query offset as a Python int
            only (it plans before tracing, as a Pallas grid is): a sequence-sharded call then
            runs one branch per shard (``lax.switch``), each with its own static offset.
        separate_value_head_dim: (contract 1.3) the kernel takes values whose head dim differs
            from the queries' and keys' (``spec.value_head_dim``); its ``check`` then decides.
            ``False`` for a kernel written before 1.3, which is never asked for such a call.

    Contract 1.2 adds the optional feature ``query_offset`` (``spec.has_query_offset``): the
    queries are one block of a longer sequence (a sequence sharded over a mesh axis), and
    ``__call__`` receives the block's first position as ``query_offset=``. A kernel serves it
    when its ``check`` accepts such a spec and its ``__call__`` has the ``query_offset``
    parameter; a kernel written before 1.2 has none and is refused (:func:`contract_reason`).

    Contract 1.3 adds two optional features. ``sinks`` (``spec.has_sinks``): one learned logit
    per query head in every row's softmax denominator, none in the numerator; ``__call__``
    receives the ``[N]`` array as ``sinks=`` and must give its gradient. A value head dim that
    differs from the queries' (``spec.value_head_dim``): served by a kernel that declares
    ``separate_value_head_dim = True``. A kernel written for 1.2 has neither the ``sinks``
    parameter nor the flag and is passed over for such calls, with the feature named.
    """

    contract_version: ClassVar[str] = CONTRACT_VERSION
    partitionable: ClassVar[bool] = True
    sequence_tile: ClassVar[int] = 1
    static_query_offset: ClassVar[bool] = False
    separate_value_head_dim: ClassVar[bool] = False

    @abc.abstractmethod
    def check(self, spec: AttentionSpec) -> str | None:
        """Return ``None`` if the kernel can serve ``spec``, else one sentence saying why not.

        Runs before tracing, so it may only look at the spec and the environment.
        ``spec.platform`` and ``spec.device_kind`` are the target's (the active mesh's when
        there is one), not necessarily the host's.
        """

    @abc.abstractmethod
    def __call__(
        self,
        query: jax.Array,
        key: jax.Array,
        value: jax.Array,
        segment_ids: tuple[jax.Array, jax.Array] | None,
        spec: AttentionSpec,
    ) -> jax.Array:
        """Compute attention for a call already validated into ``spec``.

        A kernel serving contract 1.2's query offset adds the keyword-only parameter
        ``query_offset: jax.Array | None = None`` (an optional parameter, so the signature stays
        compatible with this one). A kernel serving contract 1.3's sinks adds
        ``sinks: jax.Array | None = None`` the same way.

        Args:
            query: ``[B, T, N, H]``.
            key: ``[B, S, K, H]``.
            value: ``[B, S, K, Hv]`` (``Hv = spec.v_head_dim``; ``H`` before contract 1.3).
            segment_ids: ``None`` or ``(q_ids [B, T], kv_ids [B, S])`` as int32.
            spec: the static description of the call; ``spec.scale`` is already resolved.
                Under ``shard_map`` (``partitionable = False`` on a mesh) the arrays and the
                spec are one shard's.
            query_offset: (1.2, when the kernel declares it) int32 scalar, the position of
                query row 0 for the causal and window rules (keys start at 0); passed only when
                ``spec.has_query_offset``.
            sinks: (1.3, when the kernel declares it) ``[N]`` floating logits, one per query
                head (one shard's heads under ``shard_map``); passed only when
                ``spec.has_sinks``. A row's weights are ``exp(s_j) / (exp(sink) + sum_j
                exp(s_j))``.

        Returns:
            ``[B, T, N, Hv]`` in ``query.dtype``; rows that see no key are zeros.
        """


def _takes(kernel: AttentionKernel, name: str) -> bool:
    try:
        params = inspect.signature(kernel.__call__).parameters
    except (TypeError, ValueError):
        return False
    return name in params or any(p.kind is p.VAR_KEYWORD for p in params.values())


def takes_query_offset(kernel: AttentionKernel) -> bool:
    """Whether ``kernel.__call__`` accepts ``query_offset=`` (contract 1.2)."""
    return _takes(kernel, "query_offset")


def takes_sinks(kernel: AttentionKernel) -> bool:
    """Whether ``kernel.__call__`` accepts ``sinks=`` (contract 1.3)."""
    return _takes(kernel, "sinks")


def run_kernel(
    kernel: AttentionKernel,
    query: jax.Array,
    key: jax.Array,
    value: jax.Array,
    segment_ids: tuple[jax.Array, jax.Array] | None,
    spec: AttentionSpec,
    query_offset: jax.Array | int | None = None,
    sinks: jax.Array | None = None,
) -> jax.Array:
    """``kernel(...)``, with ``query_offset=`` when ``spec.has_query_offset`` and ``sinks=``
    when ``spec.has_sinks`` (resolution has checked the kernel takes them:
    :func:`contract_reason`)."""
    extra: dict[str, Any] = {}
    if spec.has_query_offset:
        extra["query_offset"] = query_offset
    if spec.has_sinks:
        extra["sinks"] = sinks
    if not extra:
        return kernel(query, key, value, segment_ids, spec)
    call: Any = kernel  # the 1.2 and 1.3 parameters are the kernel's own, not the base's
    return call(query, key, value, segment_ids, spec, **extra)


def contract_reason(kernel: AttentionKernel, spec: AttentionSpec) -> str | None:
    """Why a kernel cannot serve ``spec`` whatever its ``check`` says (``None``: its ``check``
    decides): a kernel written before contract 1.2 never heard of a query offset, so its
    ``check`` cannot refuse one, and its call has no ``query_offset`` to receive it; one
    written before 1.3 has no ``sinks`` parameter, nor the ``separate_value_head_dim`` flag."""
    if spec.has_query_offset and not takes_query_offset(kernel):
        return (
            "its call takes no query offset (contract 1.2), which causal and window masks "
            "need on a sequence split over devices."
        )
    if spec.has_sinks and not takes_sinks(kernel):
        return "its call takes no attention sinks (contract 1.3's sinks)."
    if spec.value_head_dim is not None and not kernel.separate_value_head_dim:
        return (
            f"it does not serve a value head dim ({spec.value_head_dim}) other than the query "
            f"head dim ({spec.head_dim}) (contract 1.3's value_head_dim)."
        )
    return None
