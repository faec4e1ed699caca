"""The kernel interface every fused linear cross-entropy implementation provides."""

from __future__ import annotations

import abc
from typing import ClassVar

import jax
import jax.numpy as jnp

from .._base import Kernel
from ._spec import CrossEntropySpec

#: The fused linear cross-entropy contract. Its major number is zoo-attention's major version,
#: as the attention and grouped-matmul contracts' are. A kernel without a summed loss of its own
#: (:meth:`CrossEntropyKernel.loss`) is served through its per-token call.
CROSS_ENTROPY_CONTRACT_VERSION = "1.0"


def sum_losses(
    ce: jax.Array, log_z: jax.Array, weights: jax.Array | None, z_loss: float
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """``(loss_sum, ce_sum, z_sum)`` of per-token ``ce`` and ``log_z`` (zero where a token
    does not count): ``ce_sum = Σ w ce``, ``z_sum = Σ w log_z²``, ``loss_sum = ce_sum + z_loss
    · z_sum``, with ``w = weights`` (``None``: 1)."""
    if weights is None:
        ce_sum, z_sum = jnp.sum(ce), jnp.sum(jnp.square(log_z))
    else:
        ce_sum, z_sum = jnp.sum(weights * ce), jnp.sum(weights * jnp.square(log_z))
    return ce_sum + z_loss * z_sum, ce_sum, z_sum


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
        fuses_loss: whether the kernel has a summed loss of its own (it overrides
            :meth:`loss`); the contract serves the others' summed calls through their
            per-token call. A kernel that is not partitionable is served so on a mesh too.
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

    @property
    def fuses_loss(self) -> bool:
        """Whether the kernel overrides :meth:`loss`."""
        return type(self).loss is not CrossEntropyKernel.loss

    def loss(
        self,
        hidden: jax.Array,
        head: jax.Array,
        targets: jax.Array,
        weights: jax.Array | None,
        spec: CrossEntropySpec,
        z_loss: float,
    ) -> tuple[jax.Array, jax.Array, jax.Array]:
        """The summed loss: ``(loss_sum, ce_sum, z_sum)``, float32 scalars.

        With ``ce`` and ``log_z`` as :meth:`__call__` gives them, ``ce_sum = Σ w ce``,
        ``z_sum = Σ w log_z²`` and ``loss_sum = ce_sum + z_loss · z_sum``. A kernel may
        override it to compute the gradients in the forward pass, the weights and ``z_loss``
        being known there (``fused_xla`` does); this default sums the per-token call.

        Args:
            hidden, head, targets, spec: as for :meth:`__call__`.
            weights: float32 ``[N]``, each token's weight (0: it does not count and its
                target is never read), or ``None`` (all 1). Not differentiated.
            z_loss: the weight of ``log_z²`` (a Python float, 0 for none).

        Returns:
            ``loss_sum``, differentiable with respect to ``hidden`` and ``head``; ``ce_sum``
            and ``z_sum``, whose gradients the contract discards (they are metrics).
        """
        mask = None if weights is None else weights != 0
        ce, log_z = self(hidden, head, targets, mask, spec)
        return sum_losses(ce, log_z, weights, z_loss)
