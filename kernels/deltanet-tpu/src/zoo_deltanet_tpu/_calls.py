"""The two ``pallas_call``s: the forward over the chunks of each (row, head), carrying the
state in VMEM, and the backward over the chunks in reverse, carrying the state's gradient."""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from ._chunk import chunk_step, differentiable_inverse
from ._cost import backward_cost, forward_cost
from ._layout import Inputs, Layout


def _specs(inputs: Inputs, layout: Layout, *, reverse: bool) -> list[pl.BlockSpec]:
    """Block specs of the inputs (in :class:`Inputs` order, the documents' ids only when
    present), over the grid ``(row, value head, chunk)``; ``reverse`` walks the chunks from the
    last."""
    c, nc, group = layout.chunk, layout.chunks, layout.group
    dk, dv = inputs.q.shape[-1], inputs.v.shape[-1]

    def at(i: jax.Array) -> jax.Array:
        return nc - 1 - i if reverse else i

    def qk_head(n: jax.Array) -> jax.Array:
        # lax.div, not //: an index map's // consults the default device's generation.
        return jax.lax.div(n, jnp.int32(group))

    per_head = pl.BlockSpec((None, None, None, 1, c), lambda b, n, i: (b, n, at(i), 0, 0))
    per_row = pl.BlockSpec((None, None, 1, c), lambda b, n, i: (b, at(i), 0, 0))
    specs = [
        pl.BlockSpec((None, None, c, dk), lambda b, n, i: (b, qk_head(n), at(i), 0)),
        pl.BlockSpec((None, None, c, dk), lambda b, n, i: (b, qk_head(n), at(i), 0)),
        pl.BlockSpec((None, None, c, dv), lambda b, n, i: (b, n, at(i), 0)),
        per_head,
        per_head,
        per_row,
        per_row,
        pl.BlockSpec((None, None, 1, 1), lambda b, n, i: (b, at(i), 0, 0)),
    ]
    if layout.segments:
        specs.append(per_row)
    specs.append(pl.BlockSpec((None, None, dk, dv), lambda b, n, i: (b, n, 0, 0)))
    return specs


def _arrays(inputs: Inputs, layout: Layout) -> list[jax.Array]:
    arrays = [inputs.q, inputs.k, inputs.v, inputs.beta, inputs.cum]
    arrays += [inputs.reads, inputs.writes, inputs.carry]
    if layout.segments:
        assert inputs.seg is not None
        arrays.append(inputs.seg)
    return [*arrays, inputs.state]


def _inputs_count(layout: Layout) -> int:
    return 10 if layout.segments else 9


def _chunk_args(
    refs: list[Any], segments: bool
) -> tuple[tuple[jax.Array, ...], tuple[jax.Array, jax.Array, jax.Array], jax.Array | None]:
    """From the input refs: the chunk's differentiable arrays (q, k, v in float32, beta, cum),
    its documents' masks (reads, writes, carry) and ids."""
    q, k, v, beta, cum = (r[...] for r in refs[:5])
    reads, writes, carry = (r[...] for r in refs[5:8])
    ids = refs[8][...] if segments else None
    return (q, k, v.astype(jnp.float32), beta, cum), (reads, writes, carry), ids


def _forward_kernel(layout: Layout, save: bool, *refs: Any) -> None:
    n_in = _inputs_count(layout)
    inputs, outputs = list(refs[:n_in]), list(refs[n_in:])
    out_ref, final_ref = outputs[0], outputs[1]
    states_ref = outputs[2] if save else None
    state_ref = outputs[-1]  # the VMEM scratch carrying the state over the chunks
    i = pl.program_id(2)

    @pl.when(i == 0)
    def _start() -> None:
        state_ref[...] = inputs[-1][...]

    state = state_ref[...]
    if states_ref is not None:
        states_ref[...] = state
    (q, k, v, beta, cum), (reads, writes, carry), ids = _chunk_args(inputs, layout.segments)
    out, after = chunk_step(state, q, k, v, beta, cum, reads, writes, carry, ids)
    out_ref[...] = out.astype(out_ref.dtype)
    state_ref[...] = after

    @pl.when(i == layout.chunks - 1)
    def _finish() -> None:
        final_ref[...] = after


def forward(
    inputs: Inputs, layout: Layout, *, save_states: bool, interpret: Any
) -> tuple[jax.Array, ...]:
    """``(out [B, N, Tp, Dv]`` in the values' dtype, ``final state [B, N, Dk, Dv])`` and, with
    ``save_states``, the state before each chunk ``[B, N, nc, Dk, Dv]`` (the backward pass
    reads them)."""
    b, n, tp, dv = inputs.v.shape
    dk, c, nc = inputs.q.shape[-1], layout.chunk, layout.chunks
    out_specs = [
        pl.BlockSpec((None, None, c, dv), lambda b, n, i: (b, n, i, 0)),
        pl.BlockSpec((None, None, dk, dv), lambda b, n, i: (b, n, 0, 0)),
    ]
    out_shape = [
        jax.ShapeDtypeStruct((b, n, tp, dv), inputs.v.dtype),
        jax.ShapeDtypeStruct((b, n, dk, dv), jnp.float32),
    ]
    if save_states:
        out_specs.append(pl.BlockSpec((None, None, None, dk, dv), lambda b, n, i: (b, n, i, 0, 0)))
        out_shape.append(jax.ShapeDtypeStruct((b, n, nc, dk, dv), jnp.float32))
    return tuple(
        pl.pallas_call(
            functools.partial(_forward_kernel, layout, save_states),
            grid=(b, n, nc),
            in_specs=_specs(inputs, layout, reverse=False),
            out_specs=out_specs,
            out_shape=out_shape,
            scratch_shapes=[pltpu.VMEM((dk, dv), jnp.float32)],
            compiler_params=pltpu.CompilerParams(
                dimension_semantics=("parallel", "parallel", "arbitrary")
            ),
            cost_estimate=forward_cost(b, n, nc, c, dk, dv),
            interpret=interpret,
            name="zoo_deltanet_tpu_forward",
        )(*_arrays(inputs, layout))
    )


def _backward_kernel(layout: Layout, *refs: Any) -> None:
    n_in = _inputs_count(layout)
    inputs = list(refs[:n_in])
    states_ref, d_out_ref, d_final_ref = refs[n_in : n_in + 3]
    grads = refs[n_in + 3 : n_in + 9]  # dq, dk, dv, dbeta, dcum, dstate
    d_state_ref = refs[-1]  # the VMEM scratch carrying the state's gradient backwards
    i = pl.program_id(2)

    @pl.when(i == 0)
    def _start() -> None:
        d_state_ref[...] = d_final_ref[...]

    values, (reads, writes, carry), ids = _chunk_args(inputs, layout.segments)

    def step(
        state: jax.Array,
        q: jax.Array,
        k: jax.Array,
        v: jax.Array,
        beta: jax.Array,
        cum: jax.Array,
    ) -> tuple[jax.Array, jax.Array]:
        # The documents' masks and ids are not differentiated.
        return chunk_step(
            state, q, k, v, beta, cum, reads, writes, carry, ids, invert=differentiable_inverse
        )

    _, vjp = jax.vjp(step, states_ref[...], *values)
    d_out = d_out_ref[...].astype(jnp.float32)
    d_before, *d_values = vjp((d_out, d_state_ref[...]))
    for ref, d in zip(grads[:5], d_values, strict=True):
        ref[...] = d.astype(ref.dtype)
    d_state_ref[...] = d_before

    @pl.when(i == layout.chunks - 1)
    def _finish() -> None:
        grads[5][...] = d_before


def backward(
    inputs: Inputs,
    layout: Layout,
    states: jax.Array,
    d_out: jax.Array,
    d_final: jax.Array,
    *,
    interpret: Any,
) -> tuple[jax.Array, ...]:
    """The gradients, per value head: ``dq, dk [B, N, Tp, Dk]`` float32, ``dv [B, N, Tp,
    Dv]`` in the values' dtype, ``dbeta, dcum [B, N, nc, 1, C]`` and the initial state's
    ``[B, N, Dk, Dv]``, from the output's and final state's cotangents and the states before
    each chunk."""
    b, n, tp, dv = inputs.v.shape
    dk, c, nc = inputs.q.shape[-1], layout.chunk, layout.chunks

    def at(i: jax.Array) -> jax.Array:
        return nc - 1 - i

    def head(width: int) -> pl.BlockSpec:
        return pl.BlockSpec((None, None, c, width), lambda b, n, i: (b, n, at(i), 0))

    per_head = pl.BlockSpec((None, None, None, 1, c), lambda b, n, i: (b, n, at(i), 0, 0))
    whole = pl.BlockSpec((None, None, dk, dv), lambda b, n, i: (b, n, 0, 0))
    in_specs = [
        *_specs(inputs, layout, reverse=True),
        pl.BlockSpec((None, None, None, dk, dv), lambda b, n, i: (b, n, at(i), 0, 0)),
        head(dv),
        whole,
    ]
    f32 = jnp.float32
    out_shape = [
        jax.ShapeDtypeStruct((b, n, tp, dk), f32),
        jax.ShapeDtypeStruct((b, n, tp, dk), f32),
        jax.ShapeDtypeStruct((b, n, tp, dv), inputs.v.dtype),
        jax.ShapeDtypeStruct((b, n, nc, 1, c), f32),
        jax.ShapeDtypeStruct((b, n, nc, 1, c), f32),
        jax.ShapeDtypeStruct((b, n, dk, dv), f32),
    ]
    return tuple(
        pl.pallas_call(
            functools.partial(_backward_kernel, layout),
            grid=(b, n, nc),
            in_specs=in_specs,
            out_specs=[head(dk), head(dk), head(dv), per_head, per_head, whole],
            out_shape=out_shape,
            scratch_shapes=[pltpu.VMEM((dk, dv), f32)],
            compiler_params=pltpu.CompilerParams(
                dimension_semantics=("parallel", "parallel", "arbitrary")
            ),
            cost_estimate=backward_cost(b, n, nc, c, dk, dv),
            interpret=interpret,
            name="zoo_deltanet_tpu_backward",
        )(*_arrays(inputs, layout), states, d_out, d_final)
    )
