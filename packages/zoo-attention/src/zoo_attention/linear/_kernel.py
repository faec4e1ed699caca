"""The kernel interface every gated-delta-rule implementation provides."""

from __future__ import annotations

import abc
from typing import ClassVar

import jax

from .._base import Kernel
from ._spec import LinearAttentionSpec

#: The linear-attention contract. Its major number is zoo-attention's major version, as the
#: attention and grouped-matmul contracts' are: a breaking change to any is a major release.
LINEAR_ATTENTION_CONTRACT_VERSION = "1.0"


class LinearAttentionKernel(Kernel):
    """One gated-delta-rule implementation behind the contract.

    A kernel package exposes an instance through the entry-point group
    ``zoo.linear_attention_kernels``; the registry fills in ``version`` from the distribution's
    metadata when the kernel does not set it.

    Attributes:
        name: the name users pass as ``implementation=`` and in ``ZOO_LINEAR_ATTENTION``.
        version: the version of the distribution that ships the kernel.
        contract_version: the linear-attention contract version the kernel implements.
        platforms: JAX backends whose default order includes the kernel.
        priority: place in the default order on those platforms; higher is tried first, and 0
            or below means opt-in (used only when named).
        check: ``check(spec: LinearAttentionSpec) -> None | reason``, before tracing.
        partitionable: whether XLA can partition the kernel's computation over a mesh (pure
            JAX kernels). ``False`` for a Pallas/Mosaic call: on a mesh the contract runs it
            under ``shard_map`` over the batch and head axes (each row and head is independent).
    """

    contract_version: ClassVar[str] = LINEAR_ATTENTION_CONTRACT_VERSION
    partitionable: ClassVar[bool] = True

    @abc.abstractmethod
    def __call__(
        self,
        query: jax.Array,
        key: jax.Array,
        value: jax.Array,
        log_decay: jax.Array,
        beta: jax.Array,
        segment_ids: jax.Array | None,
        initial_state: jax.Array | None,
        spec: LinearAttentionSpec,
    ) -> tuple[jax.Array, jax.Array]:
        """Run the gated delta rule for a call already validated into ``spec``.

        Args:
            query, key: ``[B, T, K, Dk]`` in ``spec.dtype`` (not yet normalised or scaled:
                ``spec.normalize_qk`` and ``spec.scale`` say what to do).
            value: ``[B, T, N, Dv]`` in ``spec.dtype``; value head ``n`` reads query/key head
                ``n // (N // K)``.
            log_decay: ``[B, T, N]``, any floating dtype; entries are ``<= 0``.
            beta: ``[B, T, N]``, any floating dtype.
            segment_ids: ``None`` or int32 ``[B, T]``: the state is reset where the id changes.
            initial_state: ``None`` (zeros) or float32 ``[B, N, Dk, Dv]``.
            spec: the static description of the call (one shard's under ``shard_map``).

        Returns:
            ``(out [B, T, N, Dv] in spec.dtype, final_state [B, N, Dk, Dv] float32)``.
        """
