"""``fused_xla``: fused linear cross entropy in plain JAX, every platform, every feature.

The tokens go through in tiles under ``lax.scan`` (``_fused_vjp``), a tile's float32 logits
being the largest thing it holds, in the forward pass and in the backward pass, which
recomputes them (one more matmul of the head than the plain path). XLA partitions it over a
mesh like any JAX code: the tokens over the batch axes, the vocabulary over a tensor axis.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from ._fused_policy import tile_tokens
from ._fused_vjp import fused_cross_entropy
from ._kernel import CrossEntropyKernel
from ._spec import CrossEntropySpec


class FusedXlaKernel(CrossEntropyKernel):
    """Token tiles under ``scan`` with a custom VJP; any shape, dtype, layout, soft cap and
    platform. Preferred over ``logits`` everywhere."""

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
        return fused_cross_entropy(hidden, head, targets, counts, spec, tile_tokens(spec))


KERNEL = FusedXlaKernel()
