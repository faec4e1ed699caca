"""Shardings of parameters, optimizer state and batches, from the layers' logical axis names."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import equinox as eqx
import jax
import optax
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P
from jaxtyping import PyTree

import zoo_layers

from ._rules import UNNAMED, MeshAxes, rule_axes


def is_array_like(x: Any) -> bool:
    """An array or an abstract one (``jax.ShapeDtypeStruct``)."""
    return eqx.is_array(x) or isinstance(x, jax.ShapeDtypeStruct)


def replicated(mesh: Mesh) -> NamedSharding:
    """Every device holds the whole array."""
    return NamedSharding(mesh, P())


def _largest_dim_spec(shape: Sequence[int], axes: tuple[str, ...], sizes: Mapping[str, int]) -> P:
    """Shard the largest dimension the mesh axes divide (an unnamed array's FSDP)."""
    axes = tuple(a for a in axes if sizes.get(a, 1) > 1)
    shards = math.prod(sizes[a] for a in axes)
    if not axes:
        return P()
    for dim in sorted(range(len(shape)), key=lambda d: -shape[d]):
        if shape[dim] % shards == 0:
            entries: list[Any] = [None] * len(shape)
            entries[dim] = axes[0] if len(axes) == 1 else axes
            return P(*entries)
    return P()


def array_spec(
    axes: zoo_layers.LogicalAxes, shape: Sequence[int], rules: Mapping[str, MeshAxes], mesh: Mesh
) -> P:
    """The ``PartitionSpec`` of one array with logical ``axes`` under ``rules``."""
    sizes = dict(mesh.shape)
    if len(axes) != len(shape):
        axes = zoo_layers.LogicalAxes.unnamed(len(shape))
    if axes.is_unnamed:
        return _largest_dim_spec(shape, rule_axes(rules, UNNAMED), sizes)
    return zoo_layers.logical_to_spec(axes.names, shape, rules, sizes)


def tree_shardings(tree: PyTree, mesh: Mesh, rules: Mapping[str, MeshAxes]) -> PyTree:
    """A ``NamedSharding`` for every array (or ``ShapeDtypeStruct``) of ``tree``, by the logical
    names its layers declare; the tree has the structure of ``eqx.filter(tree, is_array_like)``."""
    names = zoo_layers.logical_axes(eqx.filter(tree, is_array_like))
    arrays = eqx.filter(tree, is_array_like)
    return jax.tree.map(
        lambda axes, x: NamedSharding(mesh, array_spec(axes, x.shape, rules, mesh)),
        names,
        arrays,
        is_leaf=lambda a: isinstance(a, zoo_layers.LogicalAxes),
    )


def fit_sharding(sharding: NamedSharding, shape: Sequence[int]) -> NamedSharding:
    """``sharding`` if it is valid for ``shape``, else the same mesh with every dimension the
    spec cannot divide (or does not reach) replicated."""
    spec = tuple(sharding.spec)
    sizes = dict(sharding.mesh.shape)
    entries: list[Any] = []
    for dim, size in enumerate(shape):
        entry = spec[dim] if dim < len(spec) else None
        names = () if entry is None else (entry,) if isinstance(entry, str) else tuple(entry)
        entries.append(entry if size % math.prod(sizes[n] for n in names) == 0 else None)
    while entries and entries[-1] is None:  # canonical: P() rather than P(None, None)
        entries.pop()
    return NamedSharding(sharding.mesh, P(*entries))


def state_shardings(
    state: Any,
    optimizer: optax.GradientTransformation,
    mesh: Mesh,
    rules: Mapping[str, MeshAxes],
) -> Any:
    """Shardings of a ``TrainState`` (concrete or abstract): parameters and frozen arrays by their
    logical names, optimizer state like the parameters it tracks (``optax.tree_map_params``),
    counters and the RNG key replicated. Structured like ``eqx.filter(state, is_array_like)``."""
    params = tree_shardings(state.params, mesh, rules)
    frozen = tree_shardings(state.frozen, mesh, rules)
    rep = replicated(mesh)
    opt = optax.tree_map_params(
        optimizer,
        lambda leaf, sharding: fit_sharding(sharding, leaf.shape),
        state.opt_state,
        params,
        transform_non_params=lambda leaf: rep if is_array_like(leaf) else None,
        is_leaf=lambda x: isinstance(x, NamedSharding),
    )
    return type(state)(params=params, frozen=frozen, opt_state=opt, step=rep, skipped=rep, key=rep)


def batch_spec(mesh: Mesh, rules: Mapping[str, MeshAxes]) -> P:
    """Rows of a batch over the mesh axes of the ``batch`` rule (size-1 axes left out)."""
    axes = tuple(a for a in rule_axes(rules, zoo_layers.BATCH) if mesh.shape.get(a, 1) > 1)
    return P(axes[0] if len(axes) == 1 else axes) if axes else P()


def batch_shards(mesh: Mesh, rules: Mapping[str, MeshAxes]) -> int:
    """How many ways a batch's rows are split (the product of the ``batch`` rule's axes)."""
    return math.prod(mesh.shape.get(a, 1) for a in rule_axes(rules, zoo_layers.BATCH))


def batch_array_spec(mesh: Mesh, rules: Mapping[str, MeshAxes], ndim: int) -> P:
    """The spec of one batch array of rank ``ndim``: rows by the ``batch`` rule and, from rank
    2, the last dimension (the sequence: ``[B, T]`` entries, a packed batch's ``[B, k, T]``) by
    the ``sequence`` rule (size-1 axes left out)."""
    rows = tuple(batch_spec(mesh, rules))
    axes = tuple(a for a in rule_axes(rules, zoo_layers.SEQUENCE) if mesh.shape.get(a, 1) > 1)
    if ndim < 2 or not axes:
        return P(*rows)
    entries: list[Any] = [rows[0] if rows else None] + [None] * (ndim - 1)
    entries[-1] = axes[0] if len(axes) == 1 else axes
    return P(*entries)


def batch_shardings(batch: PyTree, mesh: Mesh, rules: Mapping[str, MeshAxes]) -> PyTree:
    """A ``NamedSharding`` per batch array: rows split by the ``batch`` rule, the sequence (the
    last dimension from rank 2) by the ``sequence`` rule."""
    return jax.tree.map(
        lambda x: fit_sharding(
            NamedSharding(mesh, batch_array_spec(mesh, rules, len(x.shape))), x.shape
        ),
        batch,
    )


def with_shardings(tree: PyTree, shardings: PyTree) -> PyTree:
    """Abstract ``tree`` (``ShapeDtypeStruct`` leaves) carrying ``shardings``."""
    arrays, static = eqx.partition(tree, is_array_like)
    abstract = jax.tree.map(
        lambda x, s: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=s), arrays, shardings
    )
    return eqx.combine(abstract, static)
