"""``deltanet_tpu``: the kernel object registered through ``zoo.linear_attention_kernels``,
and its call."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from zoo_attention.linear import (
    LinearAttentionKernel,
    LinearAttentionSpec,
    chunk_size,
    prepare_qk,
)

from ._interpret import INTERPRET_VAR, interpret_mode, interpret_requested
from ._layout import Layout, build_inputs
from ._policy import shape_problem
from ._vjp import recurrence

SUPPORTED_DTYPES = ("float32", "bfloat16")


def gated_delta_rule_tpu(
    query: jax.Array,
    key: jax.Array,
    value: jax.Array,
    log_decay: jax.Array,
    beta: jax.Array,
    segment_ids: jax.Array | None,
    initial_state: jax.Array | None,
    spec: LinearAttentionSpec,
    *,
    interpret: Any = False,
) -> tuple[jax.Array, jax.Array]:
    """The gated delta rule through the Pallas kernels, the contract's arguments in and out:
    ``(out [B, T, N, Dv] in value's dtype, final state [B, N, Dk, Dv] float32)``.

    The L2 normalisation and query scale (:func:`zoo_attention.linear.prepare_qk`), the
    layouts and the chunk-local sums of the decay run in XLA and are differentiated by
    autodiff; the recurrence is the kernels' (:mod:`._vjp`). ``interpret``: Pallas interpret
    mode (``True``, or ``pltpu.InterpretParams``)."""
    q, k = prepare_qk(query, key, spec, expand=False)
    chunk = chunk_size(spec.seq_len)
    layout = Layout(
        chunk=chunk,
        chunks=-(-spec.seq_len // chunk),
        group=spec.group_size,
        segments=segment_ids is not None,
    )
    b, n, dk, dv = spec.batch, spec.num_heads, spec.key_dim, spec.value_dim
    state = jnp.zeros((b, n, dk, dv), jnp.float32) if initial_state is None else initial_state
    x = build_inputs(q, k, value, log_decay, beta, segment_ids, state, layout)
    diff = (x.q, x.k, x.v, x.beta, x.cum, x.state)
    masks = (x.reads, x.writes, x.carry, x.seg)
    out, final = recurrence(diff, masks, layout, interpret)
    out = jnp.moveaxis(out[:, :, : spec.seq_len], 1, 2)
    return out.astype(value.dtype), final


class DeltanetTpuKernel(LinearAttentionKernel):
    """The chunked gated delta rule in Pallas (Mosaic) for TPU, forward and backward."""

    name = "deltanet_tpu"
    priority = 100
    # A Mosaic call cannot be partitioned by XLA: the contract runs it under shard_map.
    partitionable = False

    @property
    def platforms(self) -> tuple[str, ...]:
        # With interpret mode asked for, the kernel is first in the default order on any
        # backend, so one variable runs a whole model through it on a CPU.
        return ("tpu", "cpu", "gpu") if interpret_requested() else ("tpu",)

    def check(self, spec: LinearAttentionSpec) -> str | None:
        if spec.platform != "tpu" and not interpret_requested():
            return (
                f"needs a TPU (the target is {spec.platform!r}); set {INTERPRET_VAR}=1 to run it "
                "in Pallas interpret mode"
            )
        if spec.dtype not in SUPPORTED_DTYPES:
            return f"dtype {spec.dtype} is not supported (float32 or bfloat16)"
        return shape_problem(spec.seq_len, spec.key_dim, spec.value_dim)

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
        interpret = False
        if spec.platform != "tpu" or interpret_requested():
            interpret = interpret_mode()
        return gated_delta_rule_tpu(
            query, key, value, log_decay, beta, segment_ids, initial_state, spec,
            interpret=interpret,
        )  # fmt: skip


KERNEL = DeltanetTpuKernel()
