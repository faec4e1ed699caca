"""The kernel interface every attention implementation provides."""

from __future__ import annotations

import abc
from typing import ClassVar

import jax

from ._base import Kernel
from ._spec import AttentionSpec

#: The attention contract. Its major number is this package's major version (shared with the
#: grouped-matmul contract, ``zoo_attention.grouped.GROUPED_MATMUL_CONTRACT_VERSION``).
CONTRACT_VERSION = "1.1"


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
    """

    contract_version: ClassVar[str] = CONTRACT_VERSION
    partitionable: ClassVar[bool] = True
    sequence_tile: ClassVar[int] = 1

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

        Args:
            query: ``[B, T, N, H]``.
            key: ``[B, S, K, H]``.
            value: ``[B, S, K, H]``.
            segment_ids: ``None`` or ``(q_ids [B, T], kv_ids [B, S])`` as int32.
            spec: the static description of the call; ``spec.scale`` is already resolved.
                Under ``shard_map`` (``partitionable = False`` on a mesh) the arrays and the
                spec are one shard's.

        Returns:
            ``[B, T, N, H]`` in ``query.dtype``; rows that see no key are zeros.
        """
