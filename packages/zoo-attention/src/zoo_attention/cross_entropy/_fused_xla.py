"""``fused_xla``: fused linear cross entropy in plain JAX, every platform, every feature.

The tokens go through in tiles under ``lax.scan`` (``_fused_loop``), a tile's float32 logits
being the largest thing it holds. The per-token call (``_fused_vjp``) recomputes a tile's
logits in the backward pass (one more product with the head than the plain path); the summed
loss (``_fused_loss``) computes the gradients in the forward pass (the plain path's three).
On a mesh both run per device under ``shard_map`` (``_fused_mesh``): the tokens over the batch
and sequence axes, the vocabulary over the vocab axes, one reduction of the head gradient per
step.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from ._fused_loss import fused_loss
from ._fused_mesh import plan
from ._fused_vjp import fused_cross_entropy
from ._kernel import CrossEntropyKernel
from ._spec import CrossEntropySpec


class FusedXlaKernel(CrossEntropyKernel):
    """Token tiles under ``scan`` with a custom VJP; any shape, dtype, layout, soft cap and
    platform, and a summed loss of its own. Preferred over ``logits`` everywhere."""

    name = "fused_xla"
    priority = 10

    def check(self, spec: CrossEntropySpec) -> str | None:
        return None

    def __call__(
        self,
        hidden: jax.Array,
        head: jax.Array,
        targets: jax.Array,
        loss_mask: jax.Array | None,
        spec: CrossEntropySpec,
    ) -> tuple[jax.Array, jax.Array]:
        counts = jnp.ones(targets.shape, bool) if loss_mask is None else loss_mask
        return fused_cross_entropy(hidden, head, targets, counts, plan(spec, hidden, head))

    def loss(
        self,
        hidden: jax.Array,
        head: jax.Array,
        targets: jax.Array,
        weights: jax.Array | None,
        spec: CrossEntropySpec,
        z_loss: float,
    ) -> tuple[jax.Array, jax.Array, jax.Array]:
        w = jnp.ones(targets.shape, jnp.float32) if weights is None else weights
        return fused_loss(hidden, head, targets, w, z_loss, plan(spec, hidden, head))


KERNEL = FusedXlaKernel()
