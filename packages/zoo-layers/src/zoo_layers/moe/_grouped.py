"""``grouped_matmul``: the one function the experts of a mixture-of-experts layer multiply through.

The rows of ``lhs`` are sorted by group and group ``g``'s rows are multiplied by ``rhs[g]``.
Like attention behind ``zoo_attention``, the layer names the operation, not the code that runs
it: an implementation is chosen by name (``implementation=``, or ``ZOO_GROUPED_MATMUL``, or the
target platform's default), so a TPU grouped-matmul kernel can arrive as a package of its own,
registered through the entry-point group ``zoo.grouped_matmul``, without touching the layer.

Built in:

- ``ragged_dot``: ``jax.lax.ragged_dot``, XLA's grouped matmul; the default on TPU and GPU.
  XLA:CPU lowers it to a masked product with every group (the FLOPs of all the groups).
- ``tiled``: rows padded per group to tiles of one group each and multiplied tile by tile
  (:mod:`._tiled`), so the FLOPs are those of the rows plus the padding; the default on CPU.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import logging
import os
from collections.abc import Callable

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, Int

import zoo_attention

from ._tiled import tiled_grouped_matmul

ENV_VAR = "ZOO_GROUPED_MATMUL"
ENTRY_POINT_GROUP = "zoo.grouped_matmul"

logger = logging.getLogger("zoo_layers")

Call = Callable[[Array, Array, Array], Array]


@dataclasses.dataclass(frozen=True)
class GroupedMatmul:
    """A grouped-matmul implementation.

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


def _ragged_dot(lhs: Array, rhs: Array, group_sizes: Array) -> Array:
    return jax.lax.ragged_dot(lhs, rhs, group_sizes, preferred_element_type=lhs.dtype)


_BUILT_IN = (
    GroupedMatmul("ragged_dot", _ragged_dot, ("tpu", "gpu")),
    GroupedMatmul("tiled", tiled_grouped_matmul, ("cpu",)),
)
_REGISTRY: dict[str, GroupedMatmul] = {g.name: g for g in _BUILT_IN}
_added: list[str] = []  # registered by packages, in the order they are preferred
_loaded = False


def register_grouped_matmul(impl: GroupedMatmul, *, replace: bool = False) -> GroupedMatmul:
    """Add ``impl``; it is preferred over the built-ins on its ``platforms``."""
    if not isinstance(impl, GroupedMatmul):
        raise TypeError(f"expected a zoo_layers.GroupedMatmul, got {type(impl).__name__}.")
    if impl.name in _REGISTRY and not replace:
        raise ValueError(f"a grouped matmul named {impl.name!r} is already registered.")
    _REGISTRY[impl.name] = impl
    if impl.name not in _added and impl.name not in {g.name for g in _BUILT_IN}:
        _added.append(impl.name)
    return impl


def _load_entry_points() -> None:
    global _loaded
    if _loaded:
        return
    _loaded = True
    found = importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)
    for ep in sorted(found, key=lambda e: e.name):
        try:
            register_grouped_matmul(ep.load(), replace=True)
        except Exception as err:  # a broken plug-in must not break the built-ins
            logger.warning("grouped matmul %r not loaded: %s", ep.name, err)


def grouped_matmuls() -> dict[str, GroupedMatmul]:
    """Every registered implementation by name (entry points loaded)."""
    _load_entry_points()
    return dict(_REGISTRY)


def resolve_grouped_matmul(implementation: str | None = None, *arrays: Array) -> GroupedMatmul:
    """The implementation a call would use: ``implementation``, else the first registered name
    in ``ZOO_GROUPED_MATMUL`` (a comma list), else the target platform's default (the target as
    for attention: the active mesh's, the inputs', else the default backend)."""
    impls = grouped_matmuls()
    if implementation is not None:
        if implementation not in impls:
            raise ValueError(
                f"unknown grouped matmul {implementation!r}; registered: {', '.join(impls)}."
            )
        return impls[implementation]
    for name in filter(None, (n.strip() for n in os.environ.get(ENV_VAR, "").split(","))):
        if name in impls:
            return impls[name]
    platform = zoo_attention.find_target(*arrays).platform
    for name in (*_added, *(g.name for g in _BUILT_IN)):
        if platform in impls[name].platforms:
            return impls[name]
    return impls["ragged_dot"]


def grouped_matmul(
    lhs: Float[Array, "M K"],
    rhs: Float[Array, "G K N"],
    group_sizes: Int[Array, " G"],
    *,
    implementation: str | None = None,
) -> Float[Array, "M N"]:
    """``out[r] = lhs[r] @ rhs[g]`` for the rows ``r`` of group ``g``: the groups are
    consecutive row ranges of ``lhs`` of ``group_sizes`` rows, in order; rows past their sum
    are zero. Computed in ``lhs``'s dtype, under the named scope
    ``zoo_layers.grouped_matmul.NAME``."""
    if lhs.ndim != 2 or rhs.ndim != 3 or lhs.shape[1] != rhs.shape[1]:
        raise ValueError(
            f"grouped_matmul needs lhs [M, K] and rhs [G, K, N], got {tuple(lhs.shape)} and "
            f"{tuple(rhs.shape)}."
        )
    if group_sizes.shape != (rhs.shape[0],) or not jnp.issubdtype(group_sizes.dtype, jnp.integer):
        raise ValueError(
            f"`group_sizes` must be integers [{rhs.shape[0]}] (one per group of rhs), got "
            f"{group_sizes.dtype} {tuple(group_sizes.shape)}."
        )
    impl = resolve_grouped_matmul(implementation, lhs, rhs)
    with jax.named_scope(f"zoo_layers.grouped_matmul.{impl.name}"):
        return impl.call(lhs, rhs.astype(lhs.dtype), group_sizes.astype(jnp.int32))
