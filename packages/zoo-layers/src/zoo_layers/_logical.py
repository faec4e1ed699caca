"""Logical axis names: what each weight dimension *is*, so that sharding is a table, not code.

Every parameterised layer names the dimensions of its weights (``Linear`` q-projection:
``("heads", "embed")``; ``Embedding``: ``("vocab", "embed")``; a stacked layer adds
``"layers"`` in front). :func:`logical_axes` collects the names of a whole model. A table of
*rules* maps logical names to mesh axes (zoo-train keeps it); :func:`logical_to_spec` turns
names into a ``PartitionSpec`` for one array, and :func:`logical_constraint` lets a layer say
how an activation should be laid out without naming a mesh: it does nothing unless rules are
active (:func:`axis_rules`).
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import math
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, TypeVar, cast

import equinox as eqx
import jax
from jax.sharding import AxisType
from jax.sharding import PartitionSpec as P
from jaxtyping import Array, PyTree

import zoo_attention

_M = TypeVar("_M", bound=eqx.Module)

# The logical names zoo's layers use.
BATCH = "batch"
EMBED = "embed"
VOCAB = "vocab"
HEADS = "heads"
KV_HEADS = "kv_heads"
HEAD_DIM = "head_dim"
MLP_AXIS = "mlp"
EXPERTS = "experts"
LAYERS = "layers"
NORM = "norm"
POSITION = "position"
#: The sequence dimension of activations (``[B, T, ...]``): split over a context axis.
SEQUENCE = "sequence"

Name = str | None
#: Logical name → mesh axis, tuple of mesh axes, or ``None`` (replicated).
Rules = Mapping[str, str | Sequence[str] | None]


@dataclasses.dataclass(frozen=True)
class LogicalAxes:
    """The logical names of one array's dimensions (``None`` for an unnamed dimension)."""

    names: tuple[Name, ...]

    @classmethod
    def unnamed(cls, ndim: int) -> LogicalAxes:
        """``ndim`` unnamed dimensions."""
        return cls((None,) * ndim)

    @property
    def is_unnamed(self) -> bool:
        """Whether no dimension has a name."""
        return all(n is None for n in self.names)

    def __len__(self) -> int:
        return len(self.names)


def _is_array_like(x: Any) -> bool:
    return eqx.is_array(x) or isinstance(x, jax.ShapeDtypeStruct)


def _annotated(x: Any) -> bool:
    return isinstance(x, eqx.Module) and callable(getattr(type(x), "logical_axes", None))


def logical_axes(tree: PyTree) -> PyTree:
    """``tree`` with every array (or ``ShapeDtypeStruct``) leaf replaced by its
    :class:`LogicalAxes`.

    Modules with a ``logical_axes()`` method name their own arrays; any other array gets
    unnamed dimensions. Works on abstract trees (``eqx.filter_eval_shape``), so shardings can be
    planned before any parameter exists.
    """

    def visit(node: Any) -> Any:
        if _annotated(node):
            return node.logical_axes()
        if _is_array_like(node):
            return LogicalAxes.unnamed(len(node.shape))
        return node

    return jax.tree.map(visit, tree, is_leaf=_annotated)


def with_names(module: _M, **fields: tuple[Name, ...]) -> _M:
    """``module`` with the named array fields replaced by their :class:`LogicalAxes` (fields
    that hold ``None`` are skipped). Helper for ``logical_axes()`` methods."""
    present = {k: v for k, v in fields.items() if getattr(module, k) is not None}
    # ``tree_at`` is untyped; replacing leaves keeps the module's class.
    return cast(
        _M,
        eqx.tree_at(
            lambda m: tuple(getattr(m, k) for k in present),
            module,
            tuple(LogicalAxes(tuple(v)) for v in present.values()),
        ),
    )


def stacked_axes(axes_tree: PyTree, arrays: PyTree, name: Name = LAYERS) -> PyTree:
    """Names of stacked arrays: ``name`` in front of each per-layer name tuple.

    ``axes_tree`` is :func:`logical_axes` of the stacked tree ``arrays``; annotated layers named
    their per-layer shapes (one dimension short) and get ``name`` prepended; unnamed arrays
    already have one name per dimension and get ``name`` on their first.
    """

    def fix(axes: LogicalAxes, x: Any) -> LogicalAxes:
        if len(axes) == len(x.shape):
            return LogicalAxes((name, *axes.names[1:]))
        return LogicalAxes((name, *axes.names))

    return jax.tree.map(fix, axes_tree, arrays, is_leaf=lambda a: isinstance(a, LogicalAxes))


def _mesh_axes(value: str | Sequence[str] | None) -> tuple[str, ...]:
    if value is None:
        return ()
    return (value,) if isinstance(value, str) else tuple(value)


def logical_to_spec(
    names: Sequence[Name], shape: Sequence[int], rules: Rules, mesh_sizes: Mapping[str, int]
) -> P:
    """The ``PartitionSpec`` the rules give an array of ``shape`` with logical ``names``.

    A mesh axis is used at most once (the first dimension that asks for it keeps it); a mesh
    axis that is not in ``mesh_sizes``, has size 1, or does not divide the dimension (with the
    axes already kept for it) is left out, so the spec is always valid for the shape. Trailing
    dimensions without a name are unnamed.
    """
    if len(names) > len(shape):
        raise ValueError(f"{len(names)} logical names {tuple(names)} for a shape {tuple(shape)}.")
    names = (*names, *(None,) * (len(shape) - len(names)))
    used: set[str] = set()
    entries: list[str | tuple[str, ...] | None] = []
    for name, dim in zip(names, shape, strict=True):
        keep: list[str] = []
        for axis in _mesh_axes(rules.get(name)) if name is not None else ():
            size = mesh_sizes.get(axis, 1)
            if axis in used or size == 1:
                continue
            if dim % (math.prod(mesh_sizes[a] for a in keep) * size) == 0:
                keep.append(axis)
        used.update(keep)
        entries.append(None if not keep else keep[0] if len(keep) == 1 else tuple(keep))
    while entries and entries[-1] is None:
        entries.pop()
    return P(*entries)


_RULES: contextvars.ContextVar[Rules | None] = contextvars.ContextVar(
    "zoo_layers_axis_rules", default=None
)


@contextlib.contextmanager
def axis_rules(rules: Rules, *, balanced: bool = False) -> Iterator[Rules]:
    """Within the block, :func:`logical_constraint` lays activations out by ``rules`` on the
    active mesh, and attention kernels that XLA cannot partition run per shard of the mesh axes
    the rules give ``"batch"`` and ``"heads"``; attention over a sequence the ``"sequence"``
    axes split runs sequence-sharded (``balanced``: the caller laid the sequence out in the
    dual-chunk order, :func:`zoo_attention.context.dual_chunk_order`); the fused cross entropy
    runs per shard of the ``"batch"`` and ``"sequence"`` axes and of the ``"vocab"`` ones."""
    token = _RULES.set(dict(rules))
    try:
        with zoo_attention.partition_axes(
            batch=_mesh_axes(rules.get(BATCH)),
            heads=_mesh_axes(rules.get(HEADS)),
            sequence=_mesh_axes(rules.get(SEQUENCE)),
            balanced=balanced,
            vocab=_mesh_axes(rules.get(VOCAB)),
        ):
            yield rules
    finally:
        _RULES.reset(token)


def current_rules() -> Rules | None:
    """The rules set by the innermost :func:`axis_rules`, or ``None``."""
    return _RULES.get()


def logical_constraint(x: Array, names: Sequence[Name]) -> Array:
    """Constrain ``x``'s layout to what the active rules give ``names`` on the active mesh.

    The identity when no rules or no mesh are active, and inside ``shard_map`` (manual axes).
    """
    rules = _RULES.get()
    mesh = jax.sharding.get_abstract_mesh()
    if rules is None or mesh.empty:
        return x
    free = {
        n: s
        for n, s, t in zip(mesh.axis_names, mesh.axis_sizes, mesh.axis_types, strict=True)
        if t != AxisType.Manual
    }
    if len(free) < len(mesh.axis_names) or math.prod(free.values()) == 1:
        return x
    return jax.lax.with_sharding_constraint(x, logical_to_spec(names, x.shape, rules, free))
