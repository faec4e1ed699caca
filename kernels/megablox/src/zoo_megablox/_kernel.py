"""``megablox``: the kernel object registered through ``zoo.grouped_matmul_kernels``."""

from __future__ import annotations

import jax

from zoo_attention.grouped import GroupedMatmulKernel, GroupedMatmulSpec

from ._call import megablox_gmm
from ._interpret import INTERPRET_VAR, interpret_params_here, interpret_requested
from ._policy import MAX_TILES, Tiling, choose_tiling, tiling_problem

SUPPORTED_DTYPES = tuple(MAX_TILES)


class MegabloxKernel(GroupedMatmulKernel):
    """JAX's Pallas (Mosaic) grouped matmul for TPU, forward and backward.

    Args:
        tiling: a fixed tiling instead of the policy's (register the instance with
            ``zoo_attention.grouped.register_kernel(..., replace=True)`` to use it).
    """

    name = "megablox"
    priority = 100
    # A Mosaic call cannot be partitioned by XLA (see zoo_attention.grouped's partitionable).
    partitionable = False

    def __init__(self, tiling: Tiling | None = None) -> None:
        self.tiling = tiling

    @property
    def platforms(self) -> tuple[str, ...]:
        # With interpret mode asked for, the kernel is first in the default order on any
        # backend, so one variable runs a whole model through it on a CPU.
        return ("tpu", "cpu", "gpu") if interpret_requested() else ("tpu",)

    def check(self, spec: GroupedMatmulSpec) -> str | None:
        if spec.platform != "tpu" and not interpret_requested():
            return (
                f"needs a TPU (the target is {spec.platform!r}); set {INTERPRET_VAR}=1 to run it "
                "in Pallas TPU interpret mode"
            )
        if spec.dtype not in SUPPORTED_DTYPES:
            return f"dtype {spec.dtype} is not supported (float32 or bfloat16)"
        if self.tiling is not None:
            return tiling_problem(self.tiling, spec.dtype)
        return None

    def tiling_for(self, spec: GroupedMatmulSpec) -> Tiling:
        """The tiling a call of ``spec`` runs with."""
        if self.tiling is not None:
            return self.tiling
        return choose_tiling(spec.m, spec.k, spec.n, spec.groups, spec.dtype)

    def __call__(
        self, lhs: jax.Array, rhs: jax.Array, group_sizes: jax.Array, spec: GroupedMatmulSpec
    ) -> jax.Array:
        interpret = False
        if spec.platform != "tpu" or interpret_requested():
            interpret = interpret_params_here()
        return megablox_gmm(
            lhs, rhs, group_sizes, tiling=self.tiling_for(spec), interpret=interpret
        )


KERNEL = MegabloxKernel()
