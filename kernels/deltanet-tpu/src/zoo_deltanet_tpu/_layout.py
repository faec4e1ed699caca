"""The kernels' inputs as XLA lays them out: heads first, the sequence padded to whole chunks,
the decay summed within each chunk, the masks of packed documents precomputed.

Everything here is plain JAX: its derivative is autodiff's, so the kernels' custom VJP covers
only the recurrence (:mod:`._vjp`).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from zoo_attention.linear import segment_masks


@dataclasses.dataclass(frozen=True)
class Layout:
    """Static facts of one call: ``chunk`` tokens per chunk, ``chunks`` of them (the sequence
    padded to ``chunks * chunk``), ``group`` value heads per query/key head, whether packed
    documents need masks."""

    chunk: int
    chunks: int
    group: int
    segments: bool

    @property
    def padded(self) -> int:
        """The padded sequence length."""
        return self.chunk * self.chunks


@dataclasses.dataclass
class Inputs:
    """The kernels' arrays. Per-token scalars are rows of a chunk (lane-dense: a ``[.., T, 1]``
    column would take 128 lanes a token in HBM).

    Attributes:
        q, k: float32 ``[B, K, Tp, Dk]``; v: ``[B, N, Tp, Dv]`` in the values' dtype.
        beta, cum: float32 ``[B, N, nc, 1, C]``: write strengths, and the log decay summed
            within each chunk.
        reads, writes: float32 ``[B, nc, 1, C]``; carry: float32 ``[B, nc, 1, 1]``.
        seg: int32 ``[B, nc, 1, C]`` document ids (``None`` without documents).
        state: float32 ``[B, N, Dk, Dv]``, the initial state.
    """

    q: jax.Array
    k: jax.Array
    v: jax.Array
    beta: jax.Array
    cum: jax.Array
    reads: jax.Array
    writes: jax.Array
    carry: jax.Array
    seg: jax.Array | None
    state: jax.Array


def _pad(x: jax.Array, pad: int, axis: int, mode: str = "constant") -> jax.Array:
    widths = [(0, 0)] * x.ndim
    widths[axis] = (0, pad)
    return jnp.pad(x, widths, mode=mode)


def heads_first(x: jax.Array, pad: int) -> jax.Array:
    """``[B, T, H, ...]`` → ``[B, H, T + pad, ...]``, zeros after ``T``."""
    return _pad(jnp.moveaxis(x, 2, 1), pad, 2)


def build_inputs(
    q: jax.Array,
    k: jax.Array,
    v: jax.Array,
    g: jax.Array,
    beta: jax.Array,
    segment_ids: jax.Array | None,
    state: jax.Array,
    layout: Layout,
) -> Inputs:
    """The kernels' inputs from the contract's layout: ``q, k [B, T, K, Dk]`` (prepared),
    ``v [B, T, N, Dv]``, ``g, beta [B, T, N]``, ``segment_ids [B, T]``, ``state``.

    Padding tokens write nothing (``beta = k = 0``) and keep the state (``g = 0``); they
    continue the last document, so the final state is the last real token's."""
    b = q.shape[0]
    c, nc = layout.chunk, layout.chunks
    pad = layout.padded - q.shape[1]

    def rows(x: jax.Array) -> jax.Array:  # [B, T, N] -> [B, N, nc, 1, C] float32
        x = heads_first(x.astype(jnp.float32), pad)
        return x.reshape(*x.shape[:2], nc, 1, c)

    reads = writes = jnp.ones((b, nc, 1, c), jnp.float32)
    carry = jnp.ones((b, nc, 1, 1), jnp.float32)
    seg = None
    if segment_ids is not None:
        ids = _pad(segment_ids, pad, 1, "edge")
        masks = segment_masks(ids, c)
        reads, writes = (m.astype(jnp.float32)[:, :, None] for m in masks[:2])
        carry = masks[2].astype(jnp.float32)[..., None, None]
        seg = ids.reshape(b, nc, 1, c)
    return Inputs(
        q=heads_first(q.astype(jnp.float32), pad),
        k=heads_first(k.astype(jnp.float32), pad),
        v=heads_first(v, pad),
        beta=rows(beta),
        cum=jnp.cumsum(rows(g), axis=-1),
        reads=reads,
        writes=writes,
        carry=carry,
        seg=seg,
        state=state.astype(jnp.float32),
    )
