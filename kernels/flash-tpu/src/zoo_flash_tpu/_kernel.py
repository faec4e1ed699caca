"""``flash_tpu``: the kernel object registered through the ``zoo.attention_kernels`` entry point."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from zoo_attention import AttentionKernel, AttentionSpec

from ._api import (
    INTERPRET_VAR,
    MAX_HEAD_DIM,
    SUPPORTED_DTYPES,
    flash_attention,
    interpret_params_here,
    interpret_requested,
)
from ._policy import (
    BlockSizes,
    MiB,
    generation_for,
    heads_per_step,
    smallest_blocks_vmem_bytes,
)


class FlashTpuKernel(AttentionKernel):
    """Pallas (Mosaic) flash attention for TPU; every feature of the contract.

    Args:
        block_sizes: fixed block sizes instead of the per-generation policy (register the
            instance with ``zoo_attention.register_kernel(..., replace=True)`` to use it).
    """

    name = "flash_tpu"
    priority = 100
    # A Mosaic call cannot be partitioned by XLA: on a mesh the contract runs it under
    # shard_map over the batch and head axes.
    partitionable = False
    # Contract 1.2's query offset, as a Python int: the grid is planned from it, so on a
    # sequence-sharded mesh the contract runs one branch per shard, each with its own offset.
    static_query_offset = True
    # Contract 1.3: values may have a head dim of their own (multi-head latent attention); the
    # sinks are served through the ``sinks`` parameter of ``__call__``.
    separate_value_head_dim = True

    def __init__(self, block_sizes: BlockSizes | None = None) -> None:
        self.block_sizes = block_sizes

    @property
    def platforms(self) -> tuple[str, ...]:
        # With interpret mode asked for, the kernel is first in the default order on any
        # backend, so one variable runs a whole model through it on a CPU.
        return ("tpu", "cpu", "gpu") if interpret_requested() else ("tpu",)

    def check(self, spec: AttentionSpec) -> str | None:
        if spec.platform != "tpu" and not interpret_requested():
            return (
                f"needs a TPU (backend is {spec.platform!r}); set {INTERPRET_VAR}=1 to run it "
                "in Pallas TPU interpret mode"
            )
        if spec.dtype not in SUPPORTED_DTYPES:
            return f"dtype {spec.dtype} is not supported (float32 or bfloat16)"
        if spec.head_dim > MAX_HEAD_DIM:
            return f"head_dim {spec.head_dim} is above the supported {MAX_HEAD_DIM}"
        # zoo-attention < 1.3 has no value head dim of its own: then it is the queries'.
        v_head_dim = getattr(spec, "v_head_dim", spec.head_dim)
        if v_head_dim > MAX_HEAD_DIM:
            return f"value head dim {v_head_dim} is above the supported {MAX_HEAD_DIM}"
        return self._vmem_reason(spec)

    def _vmem_reason(self, spec: AttentionSpec) -> str | None:
        """Why no block size fits the target's VMEM (fixed block sizes are the caller's)."""
        if self.block_sizes is not None:
            return None
        interpret = spec.platform != "tpu" or interpret_requested()
        kind = spec.device_kind if spec.platform == "tpu" else None
        generation = generation_for(kind, interpret=interpret)
        heads = heads_per_step(spec.group_size)
        # Planned for the wider of the query/key and value head dims (contract 1.3).
        width = max(spec.head_dim, getattr(spec, "v_head_dim", spec.head_dim))
        need = smallest_blocks_vmem_bytes(width, jnp.dtype(spec.dtype).itemsize, heads)
        if need <= generation.vmem_limit_bytes:
            return None
        return (
            f"head_dim {width} in {spec.dtype} with {heads} query heads per step needs "
            f"{need / MiB:.1f} MiB of VMEM at the smallest blocks (128 x 128), above the "
            f"{generation.name} limit of {generation.vmem_limit_bytes / MiB:.0f} MiB"
        )

    def __call__(
        self,
        query: jax.Array,
        key: jax.Array,
        value: jax.Array,
        segment_ids: tuple[jax.Array, jax.Array] | None,
        spec: AttentionSpec,
        *,
        query_offset: Any = None,
        sinks: jax.Array | None = None,
    ) -> jax.Array:
        offset = 0
        if query_offset is not None:
            try:
                offset = int(query_offset)  # a Python int, or a concrete (not traced) scalar
            except (TypeError, jax.errors.ConcretizationTypeError):
                raise ValueError(
                    "flash_tpu takes the query offset as a static int (it plans its grid from "
                    "it before tracing), got a traced value; use implementation='chunked'."
                ) from None
        interpret = None
        if spec.platform != "tpu" or interpret_requested():
            interpret = interpret_params_here()
        out = flash_attention(
            query,
            key,
            value,
            scale=spec.scale,
            is_causal=spec.is_causal,
            segment_ids=segment_ids,
            local_window=spec.local_window,
            logits_soft_cap=spec.logits_soft_cap,
            block_sizes=self.block_sizes,
            # The target's generation picks the block sizes, so a TPU step compiled from a
            # CPU host plans for the TPU it targets.
            device_kind=spec.device_kind if spec.platform == "tpu" else None,
            interpret=interpret,
            query_offset=offset,
            sinks=sinks,
        )
        return out.astype(jnp.dtype(spec.dtype))


KERNEL = FlashTpuKernel()
