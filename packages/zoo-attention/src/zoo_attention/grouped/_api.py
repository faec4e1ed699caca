"""``grouped_matmul``: the one entry point a mixture-of-experts layer multiplies through."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from jax.sharding import AxisType
from jax.sharding import PartitionSpec as P

from .._target import active_mesh, input_mesh
from ._kernel import GroupedMatmulKernel
from ._registry import get_kernel, resolve
from ._spec import GroupedMatmulSpec, make_spec


def scope_name(kernel: str, version: str) -> str:
    """The ``jax.named_scope`` a grouped-matmul kernel call runs in, visible in profiles and
    HLO metadata (``zoo_attention.grouped_matmul.megablox-0.1.0``)."""
    return f"zoo_attention.grouped_matmul.{kernel}-{version}"


def _call(
    kernel: GroupedMatmulKernel,
    lhs: jax.Array,
    rhs: jax.Array,
    group_sizes: jax.Array,
    spec: GroupedMatmulSpec,
) -> jax.Array:
    """Call ``kernel``; under ``shard_map``, replicated, when XLA cannot partition it and a
    mesh with free axes is active (a Mosaic call would otherwise fail to compile)."""
    mesh = None if kernel.partitionable else active_mesh() or input_mesh(lhs, rhs)
    if mesh is None:
        return kernel(lhs, rhs, group_sizes, spec)
    kinds = zip(mesh.axis_names, mesh.axis_sizes, mesh.axis_types, strict=True)
    free = {name: size for name, size, kind in kinds if kind != AxisType.Manual}
    if math.prod(free.values()) == 1:
        return kernel(lhs, rhs, group_sizes, spec)
    replicated = jax.shard_map(
        lambda a, b, s: kernel(a, b, s, spec),
        mesh=mesh,
        in_specs=(P(), P(), P()),
        out_specs=P(),
        axis_names=set(free),
        check_vma=False,
    )
    return replicated(lhs, rhs, group_sizes)


def grouped_matmul(
    lhs: jax.Array,
    rhs: jax.Array,
    group_sizes: jax.Array,
    *,
    implementation: str | None = None,
) -> jax.Array:
    """A grouped matmul through the best available kernel.

    ``out[r] = lhs[r] @ rhs[g]`` for the rows ``r`` of group ``g``: the groups are consecutive
    row ranges of ``lhs`` of ``group_sizes`` rows, in order; rows past their sum are zero (and
    get zero gradients). A group may have no rows.

    Args:
        lhs: ``[M, K]``, rows sorted by group.
        rhs: ``[G, K, N]``; cast to ``lhs``'s dtype.
        group_sizes: integers ``[G]`` summing to at most ``M``.
        implementation: a kernel name (``"ragged_dot"``, ``"tiled"``, ``"megablox"``, ...);
            ``None`` uses ``ZOO_GROUPED_MATMUL`` if set, else the target platform's default
            order.

    Returns:
        ``[M, N]`` in ``lhs``'s dtype, computed under the named scope
        ``zoo_attention.grouped_matmul.NAME-VERSION``.

    Raises:
        ValueError: a bad argument (naming it and the shapes), an unknown kernel name, or a
            named kernel that cannot serve the call (with its reason).
    """
    spec = make_spec(lhs, rhs, group_sizes)
    resolution = resolve(spec, implementation)
    kernel = get_kernel(resolution.kernel)
    with jax.named_scope(scope_name(kernel.name, kernel.version)):
        rhs = rhs.astype(lhs.dtype)
        return _call(kernel, lhs, rhs, jnp.asarray(group_sizes, jnp.int32), spec)
