"""``grouped_matmul``: the one function the experts of a mixture-of-experts layer multiply through.

The rows of ``lhs`` are sorted by group and group ``g``'s rows are multiplied by ``rhs[g]``.
Like attention, the layer names the operation, not the code that runs it: the call goes through
the grouped-matmul contract (:func:`zoo_attention.grouped.grouped_matmul`), whose kernels are
chosen by name (``implementation=``, or ``ZOO_GROUPED_MATMUL``, or the target platform's
default order) and arrive as packages of their own (``zoo-megablox`` on TPU) through the
entry-point group ``zoo.grouped_matmul_kernels``, without touching the layer.

zoo-layers adds ``tiled`` (:mod:`._tiled_kernel`), the default on CPU; ``ragged_dot``
(``jax.lax.ragged_dot``), the contract's reference, serves everywhere else unless a faster
kernel is installed.
"""

from __future__ import annotations

import threading

from jaxtyping import Array, Float, Int

from zoo_attention import grouped

from ._legacy import register_legacy_entry_points

ENV_VAR = grouped.ENV_VAR

# Registered where no entry point provides it (a source tree run without installing
# zoo-layers); nothing is imported until the registry is first used.
grouped.provide_kernel("tiled", "zoo_layers.moe._tiled_kernel:KERNEL", "zoo-layers")

_lock = threading.Lock()
_ready = False


def ensure_registered() -> None:
    """Register the implementations of zoo-layers 0.4's entry-point group, once."""
    global _ready
    if _ready:
        return
    with _lock:
        if not _ready:
            register_legacy_entry_points()
            _ready = True


def grouped_matmul(
    lhs: Float[Array, "M K"],
    rhs: Float[Array, "G K N"],
    group_sizes: Int[Array, " G"],
    *,
    implementation: str | None = None,
) -> Float[Array, "M N"]:
    """``out[r] = lhs[r] @ rhs[g]`` for the rows ``r`` of group ``g``: the groups are
    consecutive row ranges of ``lhs`` of ``group_sizes`` rows, in order; rows past their sum
    are zero. Computed in ``lhs``'s dtype through the grouped-matmul contract
    (:func:`zoo_attention.grouped.grouped_matmul`), under the named scope
    ``zoo_attention.grouped_matmul.NAME-VERSION``."""
    ensure_registered()
    return grouped.grouped_matmul(lhs, rhs, group_sizes, implementation=implementation)
