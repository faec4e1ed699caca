"""``fused_loss``: the summed loss through ``fused_xla``'s tiles, its gradients computed in the
forward pass.

With every token's weight and the z-loss weight known before the loop, each token's cotangents
are known as soon as its tile's log normaliser is (``g_ce = w``, ``g_log_z = 2 z w log_z``
for a loss cotangent of 1), so a tile's forward step goes on to its gradients: three products
with the head per tile (logits, ``d hidden``, ``d head``), the plain path's count, where the
per-token VJP, whose cotangents arrive only in the backward pass, recomputes the logits for a
fourth. The backward pass scales the two gradients by the loss's scalar cotangent. Only
differentiation runs the gradient loop: the primal (evaluation) is the forward loop alone.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from ._fused_loop import column, gradients, tiled
from ._fused_mesh import TilePlan, psum, sharded, vocab_offset
from ._fused_vjp import fused_cross_entropy
from ._kernel import sum_losses


@functools.partial(jax.custom_vjp, nondiff_argnums=(4, 5))
def fused_loss(
    hidden: jax.Array,
    head: jax.Array,
    targets: jax.Array,
    weights: jax.Array,
    z_loss: float,
    plan: TilePlan,
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """``(loss_sum, ce_sum, z_sum)``, float32 scalars: ``ce_sum = Σ w ce``, ``z_sum = Σ w
    log_z²``, ``loss_sum = ce_sum + z_loss · z_sum`` over ``hidden [N, D]`` with float32
    ``weights [N]`` (a token of weight 0 does not count). Only ``loss_sum`` carries a
    gradient (to ``hidden`` and ``head``)."""
    ce, log_z = fused_cross_entropy(hidden, head, targets, weights != 0, plan)
    return sum_losses(ce, log_z, weights, z_loss)


def _fwd(
    hidden: jax.Array,
    head: jax.Array,
    targets: jax.Array,
    weights: jax.Array,
    z_loss: float,
    plan: TilePlan,
) -> tuple[tuple[jax.Array, jax.Array, jax.Array], tuple[jax.Array, jax.Array]]:
    layout, local = plan.layout, plan.local

    def per_device(
        h: jax.Array, w: jax.Array, t: jax.Array, wt: jax.Array
    ) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
        tiles = tiled(wt, plan.tile)

        def cotangents(c: jax.Array, log_z: jax.Array) -> tuple[jax.Array, jax.Array]:
            g_ce = column(tiles, c)
            return g_ce, (2.0 * z_loss) * g_ce * log_z

        offset = vocab_offset(layout.vocab, local.vocab)
        ce, log_z, d_hidden, d_head = gradients(
            h, w, t, wt != 0, offset, layout.vocab, local, plan.tile, cotangents
        )
        return ce, log_z, psum(d_hidden, layout.vocab), psum(d_head, layout.tokens)

    rows = layout.rows()
    run = sharded(
        layout, per_device, (rows, layout.head(local), rows, rows),
        (rows, rows, rows, layout.head(local)),
    )  # fmt: skip
    ce, log_z, d_hidden, d_head = run(hidden, head.astype(hidden.dtype), targets, weights)
    counts = weights != 0
    sums = sum_losses(jnp.where(counts, ce, 0.0), jnp.where(counts, log_z, 0.0), weights, z_loss)
    # The residuals in the inputs' dtypes: the memory the plain backward pass holds for them.
    return sums, (d_hidden, d_head.astype(head.dtype))


def _bwd(
    z_loss: float,
    plan: TilePlan,
    residuals: tuple[jax.Array, jax.Array],
    cotangents: tuple[jax.Array, jax.Array, jax.Array],
) -> tuple[jax.Array, jax.Array, None, None]:
    d_hidden, d_head = residuals
    g = cotangents[0].astype(jnp.float32)
    return (
        (d_hidden.astype(jnp.float32) * g).astype(d_hidden.dtype),
        (d_head.astype(jnp.float32) * g).astype(d_head.dtype),
        None,
        None,
    )


fused_loss.defvjp(_fwd, _bwd)
