"""``tiled``: the portable grouped matmul (:mod:`._tiled`) as a kernel of the grouped-matmul
contract, registered through the entry-point group ``zoo.grouped_matmul_kernels``.

It is zoo-layers' own, not the contract's: the reference (``ragged_dot``) lives with the
contract, a faster kernel with its users. On CPU it is the default (priority 1), since XLA:CPU
multiplies every row by every group in ``ragged_dot``; elsewhere it serves when named.
"""

from __future__ import annotations

import jax

from zoo_attention.grouped import GroupedMatmulKernel, GroupedMatmulSpec

from ._tiled import tiled_grouped_matmul


class TiledKernel(GroupedMatmulKernel):
    """Rows padded per group to whole tiles, one batched matmul; any shape, any floating dtype,
    any platform."""

    name = "tiled"
    priority = 1

    @property
    def platforms(self) -> tuple[str, ...]:
        return ("cpu",)

    def check(self, spec: GroupedMatmulSpec) -> str | None:
        return None

    def __call__(
        self, lhs: jax.Array, rhs: jax.Array, group_sizes: jax.Array, spec: GroupedMatmulSpec
    ) -> jax.Array:
        return tiled_grouped_matmul(lhs, rhs, group_sizes)


KERNEL = TiledKernel()
