"""The grouped-matmul registry of zoo-layers 0.4, kept working on top of the contract's.

``GroupedMatmul`` objects (a name, a call, platforms) registered with
``register_grouped_matmul`` or under the entry-point group ``zoo.grouped_matmul`` become
kernels of the grouped-matmul contract (preferred over the built-ins on their platforms, as
before); ``resolve_grouped_matmul`` and ``grouped_matmuls`` answer in those terms. Each is
deprecated (``zoo_layers.moe`` warns when one is reached): the contract's
``GroupedMatmulKernel`` and its registry replace them.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import logging
import warnings
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from jaxtyping import Array

from zoo_attention import find_target, grouped

#: The entry-point group of zoo-layers 0.4 (``GroupedMatmul`` objects).
LEGACY_ENTRY_POINT_GROUP = "zoo.grouped_matmul"

logger = logging.getLogger("zoo_layers")

Call = Callable[[Array, Array, Array], Array]


#: The deprecated names (of ``zoo_layers.moe``; the first two of ``zoo_layers`` too) and what
#: replaces each.
DEPRECATED = {
    "GroupedMatmul": "zoo_attention.grouped.GroupedMatmulKernel",
    "register_grouped_matmul": "zoo_attention.grouped.register_kernel",
    "grouped_matmuls": "zoo_attention.grouped.kernels",
    "resolve_grouped_matmul": "zoo_attention.grouped.resolve",
    "ENTRY_POINT_GROUP": "zoo_attention.grouped.ENTRY_POINT_GROUP",
}


def deprecated_name(module: str, name: str) -> Any:
    """What the deprecated ``module.name`` is, with a ``DeprecationWarning`` naming what
    replaces it (attributed to the code that reached the name)."""
    warnings.warn(
        f"{module}.{name} is deprecated since zoo-layers 0.5.0 and goes in 0.6; use "
        f"{DEPRECATED[name]}.",
        DeprecationWarning,
        stacklevel=3,
    )
    if name == "ENTRY_POINT_GROUP":  # where zoo-layers 0.4's plug-ins registered
        return LEGACY_ENTRY_POINT_GROUP
    return globals()[name]


@dataclasses.dataclass(frozen=True)
class GroupedMatmul:
    """Deprecated (a ``zoo_attention.grouped.GroupedMatmulKernel`` replaces it): a
    grouped-matmul implementation.

    Attributes:
        name: what ``implementation=`` and ``ZOO_GROUPED_MATMUL`` call it.
        call: ``call(lhs [M, K], rhs [G, K, N], group_sizes [G]) -> [M, N]`` in ``lhs``'s dtype;
            rows past ``sum(group_sizes)`` are zero.
        platforms: the platforms (``"cpu"``, ``"gpu"``, ``"tpu"``) whose default it is, ahead of
            the built-ins.
        version: its distribution's version, for records.
    """

    name: str
    call: Call
    platforms: tuple[str, ...] = ()
    version: str | None = None


class _Adapter(grouped.GroupedMatmulKernel):
    """A ``GroupedMatmul`` as a contract kernel: serves any call, default on its platforms."""

    # Ahead of tiled (1) and ragged_dot, as register_grouped_matmul promised; below megablox.
    priority = 10

    def __init__(self, impl: GroupedMatmul) -> None:
        self.impl = impl
        self.version = impl.version or "0+unknown"

    @property
    def platforms(self) -> tuple[str, ...]:
        return self.impl.platforms

    def check(self, spec: grouped.GroupedMatmulSpec) -> str | None:
        return None

    def __call__(
        self, lhs: jax.Array, rhs: jax.Array, group_sizes: jax.Array, spec: Any
    ) -> jax.Array:
        return self.impl.call(lhs, rhs, group_sizes)


def _adapt(impl: GroupedMatmul) -> grouped.GroupedMatmulKernel:
    if not isinstance(impl, GroupedMatmul):
        raise TypeError(f"expected a zoo_layers.GroupedMatmul, got {type(impl).__name__}.")
    kind = type(f"Legacy_{impl.name}", (_Adapter,), {"name": impl.name})
    kernel: grouped.GroupedMatmulKernel = kind(impl)
    return kernel


def register_grouped_matmul(impl: GroupedMatmul, *, replace: bool = False) -> GroupedMatmul:
    """Deprecated (use ``zoo_attention.grouped.register_kernel``): add ``impl``; it is preferred
    over the built-ins on its ``platforms``."""
    from ._grouped import ensure_registered

    ensure_registered()
    try:
        grouped.register_kernel(_adapt(impl), replace=replace)
    except grouped.KernelRegistrationError as err:
        raise ValueError(str(err).replace("a kernel named", "a grouped matmul named")) from None
    return impl


def _as_legacy(kernel: grouped.GroupedMatmulKernel) -> GroupedMatmul:
    call = kernel.impl.call if isinstance(kernel, _Adapter) else None
    return GroupedMatmul(
        kernel.name,
        call or (lambda a, b, s: grouped.grouped_matmul(a, b, s, implementation=kernel.name)),
        kernel.platforms,
        kernel.version,
    )


def grouped_matmuls() -> dict[str, GroupedMatmul]:
    """Deprecated (use ``zoo_attention.grouped.kernels``): every registered implementation."""
    from ._grouped import ensure_registered

    ensure_registered()
    return {name: _as_legacy(k) for name, k in grouped.kernels().items()}


def resolve_grouped_matmul(implementation: str | None = None, *arrays: Array) -> GroupedMatmul:
    """Deprecated (use ``zoo_attention.grouped.resolve`` on a ``make_spec``): the
    implementation a call on ``arrays`` (``lhs``, ``rhs``) would use."""
    from ._grouped import ensure_registered

    ensure_registered()
    target = find_target(*arrays)
    lhs = arrays[0] if arrays else None
    rhs = arrays[1] if len(arrays) > 1 else None
    spec = grouped.GroupedMatmulSpec(
        m=lhs.shape[0] if lhs is not None else 1,
        k=lhs.shape[1] if lhs is not None else 1,
        n=rhs.shape[2] if rhs is not None else 1,
        groups=rhs.shape[0] if rhs is not None else 1,
        dtype=jnp.dtype(lhs.dtype).name if lhs is not None else "float32",
        platform=target.platform,
        device_kind=target.device_kind,
    )
    name = grouped.resolve(spec, implementation).kernel
    return _as_legacy(grouped.get_kernel(name))


def register_legacy_entry_points() -> None:
    """Register the ``GroupedMatmul`` objects of the deprecated entry-point group, each with a
    warning naming the group that replaces it (a broken one is logged and left out)."""
    found = importlib.metadata.entry_points(group=LEGACY_ENTRY_POINT_GROUP)
    for ep in sorted(found, key=lambda e: e.name):
        try:
            grouped.register_kernel(_adapt(ep.load()), replace=True)
        except Exception as err:  # a broken plug-in must not break the built-ins
            logger.warning("grouped matmul %r not loaded: %s", ep.name, err)
            continue
        logger.warning(
            "grouped matmul %r comes from the deprecated entry-point group %r; publish a "
            "zoo_attention.grouped.GroupedMatmulKernel under %r instead",
            ep.name,
            LEGACY_ENTRY_POINT_GROUP,
            grouped.ENTRY_POINT_GROUP,
        )
