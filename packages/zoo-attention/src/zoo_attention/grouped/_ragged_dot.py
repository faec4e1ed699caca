"""``ragged_dot``: the reference grouped-matmul kernel, ``jax.lax.ragged_dot``, every platform.

XLA's own grouped matmul. XLA:CPU lowers it to a masked product of every row with every group
(the FLOPs of all the groups), so faster kernels are preferred where installed; it is every
platform's fallback.
"""

from __future__ import annotations

import jax

from ._kernel import GroupedMatmulKernel
from ._spec import GroupedMatmulSpec


class RaggedDotKernel(GroupedMatmulKernel):
    """``jax.lax.ragged_dot`` in ``lhs``'s dtype; any shape, any floating dtype, any platform."""

    name = "ragged_dot"
    priority = 0

    def check(self, spec: GroupedMatmulSpec) -> str | None:
        return None

    def __call__(
        self, lhs: jax.Array, rhs: jax.Array, group_sizes: jax.Array, spec: GroupedMatmulSpec
    ) -> jax.Array:
        return jax.lax.ragged_dot(lhs, rhs, group_sizes, preferred_element_type=lhs.dtype)


KERNEL = RaggedDotKernel()
