"""The kernel interface every grouped-matmul implementation provides."""

from __future__ import annotations

import abc
from typing import ClassVar

import jax

from .._base import Kernel
from ._spec import GroupedMatmulSpec

#: The grouped-matmul contract. Its major number is zoo-attention's major version, as the
#: attention contract's is: a breaking change to either contract is a major release.
GROUPED_MATMUL_CONTRACT_VERSION = "1.0"


class GroupedMatmulKernel(Kernel):
    """One grouped-matmul implementation behind the contract.

    A kernel package exposes an instance through the entry-point group
    ``zoo.grouped_matmul_kernels``; the registry fills in ``version`` from the distribution's
    metadata when the kernel does not set it.

    Attributes:
        name: the name users pass as ``implementation=`` and in ``ZOO_GROUPED_MATMUL``.
        version: the version of the distribution that ships the kernel.
        contract_version: the grouped-matmul contract version the kernel implements.
        platforms: JAX backends whose default order includes the kernel.
        priority: place in the default order on those platforms; higher is tried first, and 0
            or below means opt-in (used only when named).
        check: ``check(spec: GroupedMatmulSpec) -> None | reason``, before tracing.
        partitionable: whether XLA can partition the kernel's computation over a mesh (pure
            JAX kernels). ``False`` for a Pallas/Mosaic call: called on a mesh outside
            ``shard_map``, the contract runs it under ``shard_map``, replicated (rows of one
            group cannot be split from the group sizes alone); a mixture-of-experts layer calls
            it inside its own ``shard_map``, on each device's rows and experts.
    """

    contract_version: ClassVar[str] = GROUPED_MATMUL_CONTRACT_VERSION
    partitionable: ClassVar[bool] = True

    @abc.abstractmethod
    def __call__(
        self, lhs: jax.Array, rhs: jax.Array, group_sizes: jax.Array, spec: GroupedMatmulSpec
    ) -> jax.Array:
        """Multiply each group's rows of ``lhs`` by its matrix of ``rhs``.

        Args:
            lhs: ``[M, K]``, rows sorted by group.
            rhs: ``[G, K, N]`` in ``lhs``'s dtype (the contract casts it).
            group_sizes: int32 ``[G]``: group ``g`` is the ``group_sizes[g]`` rows after those
                of the groups before it. Their sum may be below ``M`` (never above).
            spec: the static description of the call.

        Returns:
            ``[M, N]`` in ``lhs.dtype``: ``out[r] = lhs[r] @ rhs[g]`` for the rows ``r`` of group
            ``g``; rows past ``sum(group_sizes)`` are zeros, and so are their gradients.
        """
