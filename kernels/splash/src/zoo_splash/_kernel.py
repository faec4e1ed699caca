"""``splash``: the kernel object registered through the ``zoo.attention_kernels`` entry point."""

from __future__ import annotations

from typing import Any

import jax

from zoo_attention import AttentionKernel, AttentionSpec

from ._attention import splash_attention
from ._blocks import LANES
from ._check import unsupported_reason
from ._interpret import interpret_requested


class SplashKernel(AttentionKernel):
    """JAX's splash attention (Pallas, TPU) behind the contract; every contract feature, at
    sequence lengths that are multiples of 128.

    Second in the TPU default order, after ``flash_tpu`` (priority 100) and before ``xla``: it
    serves by default only where ``flash_tpu`` refuses a call or is not installed, and a call
    or ``ZOO_ATTENTION`` names it to put it first.
    """

    name = "splash"
    priority = 50
    # A Mosaic call cannot be partitioned by XLA: on a mesh the contract runs it under
    # shard_map over the batch and head axes.
    partitionable = False
    # Its blocks must divide the lengths and be lane multiples; the shared conformance cases
    # (zoo-attention >= 1.2) run on it at their lengths rounded up to this.
    sequence_tile = LANES
    # Contract 1.2's query offset, as a Python int: splash builds its mask's block tables
    # before tracing, so on a sequence-sharded mesh the contract runs one branch per shard.
    static_query_offset = True
    # Contract 1.3: JAX's splash takes values with a head dim of their own, and sinks.
    separate_value_head_dim = True

    @property
    def platforms(self) -> tuple[str, ...]:
        # With interpret mode asked for, the kernel is in the default order on any backend, so
        # one variable runs a whole model through it on a CPU.
        return ("tpu", "cpu", "gpu") if interpret_requested() else ("tpu",)

    def check(self, spec: AttentionSpec) -> str | None:
        return unsupported_reason(spec, interpret=interpret_requested())

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
                    "splash takes the query offset as a static int (its mask's block tables are "
                    "built before tracing), got a traced value; use implementation='chunked'."
                ) from None
        return splash_attention(
            query,
            key,
            value,
            scale=spec.scale,
            is_causal=spec.is_causal,
            segment_ids=segment_ids,
            local_window=spec.local_window,
            logits_soft_cap=spec.logits_soft_cap,
            interpret=spec.platform != "tpu" or interpret_requested(),
            query_offset=offset,
            sinks=sinks,
        )


KERNEL = SplashKernel()
