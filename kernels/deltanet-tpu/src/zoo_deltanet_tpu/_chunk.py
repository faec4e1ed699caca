"""One chunk of the gated delta rule, as the kernels' bodies compute it: matrix products and
elementwise operations only, so Mosaic lowers it, and so its derivative (``jax.vjp`` of the
same function, in the backward kernel) is matrix products too.

For a chunk of ``C`` tokens with incoming state ``S [Dk, Dv]`` (the chunkwise-parallel form of
``zoo_attention.linear``'s ``chunked_xla``, with the same masks for packed documents)::

    D  = exp(cum_i - cum_j) on i >= j in one document     (the decay between tokens)
    T  = (I + strict_lower((beta k) k^T * D))^-1
    u  = T (beta v),   w = T (beta k exp(cum))             (the WY form of C updates)
    v' = u - w S
    o  = (q exp(cum)) S + ((q k^T) * D) v'
    S' = exp(cum_last) S + (k exp(cum_last - cum))^T v'

The triangular inverse is forward substitution written as products of whole ``[C, C]``
matrices (:func:`invert_unit_lower`), exact: each row is computed from rows already final.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp

#: Rows per diagonal block of the triangular inverse (a power of two).
SUBBLOCK = 16


def _dot(a: jax.Array, b: jax.Array) -> jax.Array:
    """``a @ b`` in float32."""
    return jax.lax.dot_general(a, b, (((1,), (0,)), ((), ())), preferred_element_type=jnp.float32)


def _dot_nt(a: jax.Array, b: jax.Array) -> jax.Array:
    """``a @ b.T`` in float32."""
    return jax.lax.dot_general(a, b, (((1,), (1,)), ((), ())), preferred_element_type=jnp.float32)


def _dot_tn(a: jax.Array, b: jax.Array) -> jax.Array:
    """``a.T @ b`` in float32."""
    return jax.lax.dot_general(a, b, (((0,), (0,)), ((), ())), preferred_element_type=jnp.float32)


def invert_unit_lower(a: jax.Array) -> jax.Array:
    """``(I + a)^-1`` for a strictly lower-triangular ``a [C, C]``.

    First the diagonal blocks of :data:`SUBBLOCK` rows, by ``t = I - a_diag t`` repeated: each
    pass makes one more row of every block final (row ``r`` reads rows ``< r`` only, and those
    are final), so ``SUBBLOCK - 1`` passes are exact forward substitution, with no power series
    whose terms could cancel. Then the blocks below the diagonal the same way, a block row a
    pass: ``x = t - (t a_off) x``.
    """
    c = a.shape[0]
    row = jax.lax.broadcasted_iota(jnp.int32, (c, c), 0)
    col = jax.lax.broadcasted_iota(jnp.int32, (c, c), 1)
    eye = jnp.where(row == col, 1.0, 0.0).astype(jnp.float32)
    if c <= SUBBLOCK:
        t = eye
        for _ in range(c - 1):
            t = eye - _dot(a, t)
        return t
    shift = SUBBLOCK.bit_length() - 1
    same = jax.lax.shift_right_logical(row, shift) == jax.lax.shift_right_logical(col, shift)
    diagonal = jnp.where(same, a, 0.0)
    t = eye
    for _ in range(SUBBLOCK - 1):
        t = eye - _dot(diagonal, t)
    below = _dot(t, a - diagonal)
    x = t
    for _ in range(-(-c // SUBBLOCK) - 1):
        x = t - _dot(below, x)
    return x


def differentiable_inverse(a: jax.Array) -> jax.Array:
    """:func:`invert_unit_lower` with the inverse's derivative, ``dT = -T da T``, and none of
    the substitution's: ``T0 - T0 (a - stop_gradient(a)) T0`` is ``T0`` in value."""
    t0 = jax.lax.stop_gradient(invert_unit_lower(jax.lax.stop_gradient(a)))
    return t0 - _dot(_dot(t0, a - jax.lax.stop_gradient(a)), t0)


def _column(row: jax.Array) -> jax.Array:
    """A ``[1, C]`` row as a ``[C, 1]`` column: the diagonal of its broadcast, summed along the
    lanes (no transpose for Mosaic to lay out; its derivative is the same in reverse)."""
    c = row.shape[-1]
    eye = jax.lax.broadcasted_iota(jnp.int32, (c, c), 0) == jax.lax.broadcasted_iota(
        jnp.int32, (c, c), 1
    )
    return jnp.sum(jnp.where(eye, row, jnp.zeros((), row.dtype)), axis=1, keepdims=True)


def chunk_step(
    state: jax.Array,
    q: jax.Array,
    k: jax.Array,
    v: jax.Array,
    beta: jax.Array,
    cum: jax.Array,
    reads: jax.Array,
    writes: jax.Array,
    carry: jax.Array,
    segments: jax.Array | None,
    invert: Callable[[jax.Array], jax.Array] = invert_unit_lower,
) -> tuple[jax.Array, jax.Array]:
    """One chunk: ``(out [C, Dv], state after [Dk, Dv])``, all float32.

    The per-token scalars come as rows ``[1, C]`` (lane-dense in HBM, where a ``[C, 1]``
    column would be padded to 128 lanes).

    Args:
        state: ``[Dk, Dv]``, the state before the chunk.
        q, k: ``[C, Dk]`` (queries scaled and, as the call asks, normalised).
        v: ``[C, Dv]``.
        beta, cum: ``[1, C]``: write strengths and the cumulative log decay within the chunk.
        reads, writes: ``[1, C]``, 1.0 for tokens of the document the incoming state belongs
            to, resp. of the chunk's last document; carry: ``[1, 1]``, 1.0 when no document
            starts in the chunk.
        segments: int ``[1, C]`` document ids (``None``: one document).
        invert: the triangular inverse (:func:`differentiable_inverse` under ``jax.vjp``).
    """
    c = q.shape[0]
    row = jax.lax.broadcasted_iota(jnp.int32, (c, c), 0)
    col = jax.lax.broadcasted_iota(jnp.int32, (c, c), 1)
    lower = row >= col
    if segments is not None:
        lower = jnp.logical_and(lower, _column(segments) == segments)
    cum_col, beta_col = _column(cum), _column(beta)
    # exp of the masked differences only: above the diagonal they may be positive and large.
    decay = jnp.exp(jnp.where(lower, cum_col - cum, -jnp.inf))
    k_beta = k * beta_col
    system = _dot_nt(k_beta, k) * jnp.where(row > col, decay, 0.0)
    inverse = invert(system)
    reads_decay = jnp.exp(cum_col) * _column(reads)
    last = cum[:, c - 1 :]
    writes_decay = jnp.exp(last - cum_col) * _column(writes)
    u = _dot(inverse, v * beta_col)
    w = _dot(inverse, k_beta * reads_decay)
    new = u - _dot(w, state)
    out = _dot(q * reads_decay, state) + _dot(_dot_nt(q, k) * decay, new)
    after = jnp.exp(last) * carry * state + _dot_tn(k * writes_decay, new)
    return out, after
