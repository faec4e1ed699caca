"""The kernel interface every fused linear cross-entropy implementation provides."""

from __future__ import annotations

import abc
from typing import ClassVar

import jax

from .._base import Kernel
from ._spec import CrossEntropySpec

#: The fused linear cross-entropy contract. Its major number is zoo-attention's major version,
#: as the attention and grouped-matmul contracts' are.
CROSS_ENTROPY_CONTRACT_VERSION = "1.0"


class CrossEntropyKernel(Kernel):
    """One fused linear cross-entropy implementation behind the contract.

    A kernel package exposes an instance through the entry-point group
    ``zoo.cross_entropy_kernels``; the registry fills in ``version`` from the distribution's
    metadata when the kernel does not set it.

    Attributes:
        name: the name users pass as ``implementation=`` and in ``ZOO_CROSS_ENTROPY``.
        version: the version of the distribution that ships the kernel.
        contract_version: the cross-entropy contract version the kernel implements.
        platforms: JAX backends whose default order includes the kernel.
        priority: place in the default order on those platforms; higher is tried first, and 0
            or below means opt-in (used only when named).
        check: ``check(spec: CrossEntropySpec) -> None | reason``, before tracing.
        partitionable: whether XLA can partition the kernel's computation over a mesh (pure
            JAX kernels). ``False`` for a Pallas/Mosaic call: on a mesh the contract then runs
            it under ``shard_map``, each device on its own tokens with the whole head.
    """

    contract_version: ClassVar[str] = CROSS_ENTROPY_CONTRACT_VERSION
    partitionable: ClassVar[bool] = True

    @abc.abstractmethod
    def __call__(
        self,
        hidden: jax.Array,
        head: jax.Array,
        targets: jax.Array,
        loss_mask: jax.Array | None,
        spec: CrossEntropySpec,
    ) -> tuple[jax.Array, jax.Array]:
        """Each token's cross entropy and log normaliser, never holding all its logits.

        Args:
            hidden: ``[N, D]`` (the contract flattens the leading dimensions).
            head: ``[D, V]`` or ``[V, D]`` as ``spec.head_layout`` says, in its own dtype: the
                kernel casts it to ``hidden``'s (never transposing a copy of it).
            targets: int32 ``[N]``; a target is read only where the token counts.
            loss_mask: bool ``[N]`` (``True``: the token counts), or ``None`` (all count).
            spec: the static description of the call.

        Returns:
            ``(ce, log_z)``, float32 ``[N]`` each: with ``logits = cap(hidden @ head)``
            accumulated in float32 (``cap(x) = c tanh(x / c)`` when ``spec.soft_cap`` is
            ``c``, else the identity), ``log_z = logsumexp(logits)`` and ``ce = log_z -
            logits[target]``; both 0 where the token does not count, with zero gradients.
            Gradients flow to ``hidden`` (in its dtype) and ``head`` (in its dtype).
        """
