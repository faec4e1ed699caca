"""The kernels' ``custom_vjp``: the forward kernel, and for the backward pass the forward
kernel again (saving the state before each chunk) then the backward kernel.

Only the inputs are kept for the backward pass, not the states: the states ``[nc, Dk, Dv]`` of
every (row, head) live only while the backward pass of the layer runs.
"""

from __future__ import annotations

import functools
from typing import Any

import jax

from ._calls import backward, forward
from ._layout import Inputs, Layout

Masks = tuple[jax.Array, jax.Array, jax.Array, jax.Array | None]


def _inputs(diff: tuple[jax.Array, ...], masks: Masks) -> Inputs:
    q, k, v, beta, cum, state = diff
    reads, writes, carry, seg = masks
    return Inputs(q, k, v, beta, cum, reads, writes, carry, seg, state)


@functools.partial(jax.custom_vjp, nondiff_argnums=(2, 3))
def recurrence(
    diff: tuple[jax.Array, ...], masks: Masks, layout: Layout, interpret: Any
) -> tuple[jax.Array, jax.Array]:
    """``(out [B, N, Tp, Dv], final state)`` of the kernels' inputs: ``diff`` the
    differentiable ones (q, k, v, beta, cum, state), ``masks`` the documents' (reads, writes,
    carry, seg)."""
    out, final = forward(_inputs(diff, masks), layout, save_states=False, interpret=interpret)
    return out, final


def _fwd(
    diff: tuple[jax.Array, ...], masks: Masks, layout: Layout, interpret: Any
) -> tuple[tuple[jax.Array, jax.Array], tuple[Any, ...]]:
    return recurrence(diff, masks, layout, interpret), (diff, masks)


def _bwd(
    layout: Layout,
    interpret: Any,
    saved: tuple[Any, ...],
    cotangents: tuple[jax.Array, jax.Array],
) -> tuple[Any, ...]:
    diff, masks = saved
    inputs = _inputs(diff, masks)
    _, _, states = forward(inputs, layout, save_states=True, interpret=interpret)
    dq, dk, dv, dbeta, dcum, dstate = backward(
        inputs, layout, states, *cotangents, interpret=interpret
    )
    # The kernel gives each value head its gradient; a query/key head sums its group's.
    b, n, tp, d = dq.shape
    dq, dk = (x.reshape(b, n // layout.group, layout.group, tp, d).sum(axis=2) for x in (dq, dk))
    no_masks = jax.tree.map(lambda _: None, masks)
    return (dq, dk, dv, dbeta, dcum, dstate), no_masks


recurrence.defvjp(_fwd, _bwd)
