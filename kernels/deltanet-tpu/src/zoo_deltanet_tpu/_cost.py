"""``pl.CostEstimate`` of each kernel, so XLA's scheduler and profiles see real FLOPs and bytes."""

from __future__ import annotations

from jax.experimental import pallas as pl

from ._chunk import SUBBLOCK


def _chunk_flops(c: int, dk: int, dv: int) -> int:
    """Multiply-adds (times two) of one chunk of :func:`chunk_step`."""
    products = 2 * c * c * dk  # k k^T and q k^T
    passes = (min(c, SUBBLOCK) - 1) + 1 + max(-(-c // SUBBLOCK) - 1, 0)
    inverse = passes * c * c * c  # the triangular inverse's whole-matrix passes
    solve = c * c * (dv + dk)  # u and w
    state = 3 * c * dk * dv  # w S, q S and the state update
    mix = c * c * dv  # (q k^T * D) v'
    return 2 * (products + inverse + solve + state + mix)


def forward_cost(batch: int, heads: int, chunks: int, c: int, dk: int, dv: int) -> pl.CostEstimate:
    """The forward kernel: every chunk of every (row, head), reading q, k, v, the per-token
    scalars and writing the output."""
    steps = batch * heads * chunks
    per_token = 4 * (2 * dk + 2 * dv + 6)
    return pl.CostEstimate(
        flops=steps * _chunk_flops(c, dk, dv),
        transcendentals=steps * (c * c + 3 * c),
        bytes_accessed=steps * (c * per_token + 4 * dk * dv),
    )


def backward_cost(batch: int, heads: int, chunks: int, c: int, dk: int, dv: int) -> pl.CostEstimate:
    """The backward kernel: the chunk again and its derivative (about twice its products),
    reading the saved states and writing every gradient."""
    steps = batch * heads * chunks
    per_token = 4 * (4 * dk + 4 * dv + 10)
    return pl.CostEstimate(
        flops=steps * 3 * _chunk_flops(c, dk, dv),
        transcendentals=steps * 2 * (c * c + 3 * c),
        bytes_accessed=steps * (c * per_token + 8 * dk * dv),
    )
