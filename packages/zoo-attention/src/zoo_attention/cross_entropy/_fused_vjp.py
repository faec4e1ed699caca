"""``fused_cross_entropy``: each token's ``ce`` and ``log_z`` through ``fused_xla``'s tiles,
with a custom VJP that keeps only each token's log normaliser and recomputes a tile's logits in
the backward pass. Peak memory is one tile's logits (a few times over), not ``[N, V]``.

Both passes run per device under ``shard_map`` on a mesh (``_fused_mesh``): the backward's
head gradient is each device's own until one ``psum`` after the loop.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from ._fused_loop import column, gradients, outputs, tiled
from ._fused_mesh import TilePlan, psum, sharded, vocab_offset


@functools.partial(jax.custom_vjp, nondiff_argnums=(4,))
def fused_cross_entropy(
    hidden: jax.Array,
    head: jax.Array,
    targets: jax.Array,
    counts: jax.Array,
    plan: TilePlan,
) -> tuple[jax.Array, jax.Array]:
    """``(ce, log_z)`` float32 ``[N]`` of ``hidden [N, D]`` against ``head``, as ``plan``
    splits them; zero where ``counts [N]`` (bool) is false."""
    ce, log_z, _ = _forward(hidden, head, targets, counts, plan)
    return ce, log_z


def _forward(
    hidden: jax.Array, head: jax.Array, targets: jax.Array, counts: jax.Array, plan: TilePlan
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """The outputs, and every token's log normaliser (the backward pass's residual)."""
    layout, local = plan.layout, plan.local

    def per_device(
        h: jax.Array, w: jax.Array, t: jax.Array, k: jax.Array
    ) -> tuple[jax.Array, jax.Array, jax.Array]:
        offset = vocab_offset(layout.vocab, local.vocab)
        ce, log_z = outputs(h, w, t, offset, layout.vocab, local, plan.tile)
        return jnp.where(k, ce, 0.0), jnp.where(k, log_z, 0.0), log_z

    rows = layout.rows()
    run = sharded(layout, per_device, (rows, layout.head(local), rows, rows), (rows, rows, rows))
    # Cast before the head enters: a mesh gathers it in the computation's dtype.
    return run(hidden, head.astype(hidden.dtype), targets, counts)


def _fwd(
    hidden: jax.Array, head: jax.Array, targets: jax.Array, counts: jax.Array, plan: TilePlan
) -> tuple[tuple[jax.Array, jax.Array], tuple[jax.Array, ...]]:
    ce, log_z, residual = _forward(hidden, head, targets, counts, plan)
    return (ce, log_z), (hidden, head, targets, counts, residual)


def _bwd(
    plan: TilePlan,
    residuals: tuple[jax.Array, ...],
    cotangents: tuple[jax.Array, jax.Array],
) -> tuple[jax.Array, jax.Array, None, None]:
    hidden, head, targets, counts, log_z = residuals
    g_ce, g_log_z = (g.astype(jnp.float32) for g in cotangents)
    layout, local = plan.layout, plan.local

    def per_device(
        h: jax.Array,
        w: jax.Array,
        t: jax.Array,
        k: jax.Array,
        lz: jax.Array,
        gc: jax.Array,
        gz: jax.Array,
    ) -> tuple[jax.Array, jax.Array]:
        gc_, gz_ = tiled(gc, plan.tile), tiled(gz, plan.tile)
        offset = vocab_offset(layout.vocab, local.vocab)
        _, _, d_hidden, d_head = gradients(
            h, w, t, k, offset, layout.vocab, local, plan.tile,
            lambda c, _: (column(gc_, c), column(gz_, c)), log_z=lz,
        )  # fmt: skip
        return psum(d_hidden, layout.vocab), psum(d_head, layout.tokens)

    rows = layout.rows()
    run = sharded(
        layout, per_device, (rows, layout.head(local), rows, rows, rows, rows, rows),
        (rows, layout.head(local)),
    )  # fmt: skip
    d_hidden, d_head = run(hidden, head.astype(hidden.dtype), targets, counts, log_z, g_ce, g_log_z)
    return d_hidden, d_head.astype(head.dtype), None, None


fused_cross_entropy.defvjp(_fwd, _bwd)
