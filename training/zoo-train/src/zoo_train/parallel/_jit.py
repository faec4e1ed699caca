"""``MeshFunction``: a function jitted over the array leaves of its arguments, under a mesh.

Like ``eqx.filter_jit``, non-array leaves (an Equinox model's static fields) are static and
arrays are traced. Unlike it, inputs and outputs carry explicit shardings, so a train step's
output state is laid out exactly like its input and the step compiles once; arguments can be
donated; and :meth:`MeshFunction.lower` takes abstract arguments (``ShapeDtypeStruct`` leaves
with shardings), which is how ``zoo compile`` compiles the real step for a TPU it does not have.
Tracing happens under ``jax.set_mesh`` and the axis rules, so layers and attention kernels see
the target mesh.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import itertools
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, TypeAlias, TypeGuard

import jax
from jax.sharding import Mesh
from jaxtyping import PyTree

import zoo_layers

from ._rules import MeshAxes
from ._shardings import is_array_like

# A sharding per positional argument: a tree of shardings (``None``: unspecified), or a
# function of the argument's array part returning one.
ShardingArg: TypeAlias = PyTree | Callable[[PyTree], PyTree] | None


@contextlib.contextmanager
def mesh_context(mesh: Mesh | None, rules: Mapping[str, MeshAxes] | None = None) -> Iterator[None]:
    """``jax.set_mesh(mesh)`` and ``zoo_layers.axis_rules(rules)`` (each skipped when ``None``):
    what a sharded model is traced under, also outside a :class:`MeshFunction` (generation)."""
    with contextlib.ExitStack() as stack:
        if mesh is not None:
            stack.enter_context(jax.set_mesh(mesh))
        if rules is not None:
            stack.enter_context(zoo_layers.axis_rules(rules))
        yield


def _is_function(x: Any) -> TypeGuard[Callable[..., Any]]:
    # A sharding tree may itself be callable (an Equinox model of shardings), so only plain
    # functions count as "compute the shardings from the arguments".
    return inspect.isfunction(x) or inspect.ismethod(x) or isinstance(x, functools.partial)


# One positional argument's flattened form: its tree structure, which leaves are arrays, and the
# other (static) leaves.
_ArgKey = tuple[Any, tuple[bool, ...], tuple[Any, ...]]


def _split(args: Sequence[Any]) -> tuple[list[Any], tuple[_ArgKey, ...]]:
    """The array leaves of ``args`` in order, and a key of everything else (what a compiled
    program is specific to). One flatten per argument: cheaper than ``eqx.partition``, whose
    filtering walk costs milliseconds per call for a model's train state."""
    arrays: list[Any] = []
    keys = []
    for arg in args:
        leaves, treedef = jax.tree_util.tree_flatten(arg)
        mask = tuple(is_array_like(x) for x in leaves)
        arrays.extend(x for x, m in zip(leaves, mask, strict=True) if m)
        keys.append((treedef, mask, tuple(x for x, m in zip(leaves, mask, strict=True) if not m)))
    return arrays, tuple(keys)


def _hashable(key: tuple[_ArgKey, ...]) -> Any:
    try:
        hash(key)
        return key
    except TypeError:  # an unhashable static leaf: fall back to identity
        return tuple((t, m, tuple(id(x) for x in s)) for t, m, s in key)


def _rebuild(
    keys: Sequence[_ArgKey], arrays: Sequence[Any], *, with_static: bool = True
) -> list[Any]:
    """The arguments ``_split`` took apart, with ``arrays`` as their array leaves; without
    ``with_static``, ``None`` where the static leaves were (as ``eqx.partition`` leaves them)."""
    it = iter(arrays)
    out = []
    for treedef, mask, static in keys:
        rest = iter(static)
        out.append(
            treedef.unflatten(
                [next(it) if m else (next(rest) if with_static else None) for m in mask]
            )
        )
    return out


def _per_leaf(prefix: PyTree, tree: PyTree) -> list[Any]:
    """For each leaf of ``tree``, the entry of the tree prefix ``prefix`` (shardings, ``None``:
    unspecified) that covers it."""
    if prefix is None:
        return [None] * len(jax.tree.leaves(tree))
    out: list[Any] = []
    jax.tree.map(
        lambda entry, sub: out.extend([entry] * len(jax.tree.leaves(sub))),
        prefix,
        tree,
        is_leaf=lambda x: x is None or isinstance(x, jax.sharding.Sharding),
    )
    return out


class _Program:
    """One compiled variant: a jitted function from the array leaves of the arguments to the
    array leaves of the result, and what puts the result back together (its one entry is
    filled in when the function is traced)."""

    def __init__(self, jitted: Any, out_key: list[tuple[_ArgKey, ...]]) -> None:
        self.jitted, self.out_key = jitted, out_key


class MeshFunction:
    """``fn(*args)`` compiled over the array leaves of ``args`` on ``mesh``.

    Args:
        fn: the function; arguments and results are pytrees (Equinox modules included).
        mesh: the mesh to trace and run under; ``None``: no mesh, no shardings (plain jit).
        rules: axis rules active while tracing (:func:`zoo_layers.axis_rules`), or ``None``.
        in_shardings: one entry per positional argument (see ``ShardingArg``).
        out_shardings: a tree (prefix) of shardings for the results' arrays, a function of the
            arguments' array parts returning one, or ``None``.
        donate: positions of the arguments whose buffers the result may reuse.
        compiler_options: XLA options for the compilation.
    """

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        mesh: Mesh | None = None,
        rules: Mapping[str, MeshAxes] | None = None,
        in_shardings: Sequence[ShardingArg] | None = None,
        out_shardings: PyTree = None,
        donate: Sequence[int] = (),
        compiler_options: dict[str, Any] | None = None,
    ) -> None:
        self.fn = fn
        self.mesh = mesh
        self.rules = rules
        self.in_shardings = in_shardings
        self.out_shardings = out_shardings
        self.donate = tuple(donate)
        self.compiler_options = compiler_options
        self._cache: dict[Any, _Program] = {}

    def context(self) -> contextlib.AbstractContextManager[None]:
        """The mesh and axis rules this function traces and runs under."""
        return mesh_context(self.mesh, self.rules)

    def _shardings_for(self, dyn: list[PyTree]) -> Any:
        if self.mesh is None or self.in_shardings is None:
            return None
        out = []
        for spec, arrays in zip(self.in_shardings, dyn, strict=True):
            out.append(spec(arrays) if _is_function(spec) else spec)
        return tuple(out)

    def _build(self, arrays: list[Any], keys: tuple[_ArgKey, ...]) -> _Program:
        """Jit the variant for arguments split as ``arrays`` and ``keys`` (once per key)."""
        dyn = _rebuild(keys, arrays, with_static=False)  # each argument's array part
        out_key: list[tuple[_ArgKey, ...]] = []

        def flat_fn(*arrays: Any) -> list[Any]:
            result = self.fn(*_rebuild(keys, arrays))
            result_arrays, result_keys = _split([result])
            out_key[:] = [result_keys]
            return result_arrays

        # The program is named after the function (`jit_step`), as profiles show it.
        flat_fn.__name__ = getattr(self.fn, "__name__", flat_fn.__name__)
        first = [0, *itertools.accumulate(sum(mask) for _, mask, _ in keys)]
        kwargs: dict[str, Any] = {
            "donate_argnums": tuple(i for a in self.donate for i in range(first[a], first[a + 1])),
            "compiler_options": self.compiler_options,
        }
        shardings = self._shardings_for(dyn)
        if shardings is not None:
            kwargs["in_shardings"] = [
                s for p, d in zip(shardings, dyn, strict=True) for s in _per_leaf(p, d)
            ]
        if self.mesh is not None and self.out_shardings is not None:
            # Flat outputs need one sharding per result array: the result's structure comes
            # from an abstract evaluation (a trace, no compile).
            with self.context():
                shapes = jax.eval_shape(flat_fn, *arrays)
            (result_dyn,) = _rebuild(out_key[0], shapes, with_static=False)
            out = self.out_shardings
            prefix = out(*dyn) if _is_function(out) else out
            kwargs["out_shardings"] = _per_leaf(prefix, result_dyn)
        return _Program(jax.jit(flat_fn, **kwargs), out_key)

    def _prepare(self, args: Sequence[Any]) -> tuple[_Program, list[Any]]:
        arrays, keys = _split(args)
        cache_key = _hashable(keys)
        program = self._cache.get(cache_key)
        if program is None:
            program = self._cache[cache_key] = self._build(arrays, keys)
        return program, arrays

    def __call__(self, *args: Any) -> Any:
        program, arrays = self._prepare(args)
        with self.context():
            result = program.jitted(*arrays)
        return _rebuild(program.out_key[0], result)[0]

    def lower(self, *args: Any) -> Any:
        """``jax.jit(...).lower`` on ``args`` (arrays or ``ShapeDtypeStruct`` leaves)."""
        program, arrays = self._prepare(args)
        with self.context():
            return program.jitted.lower(*arrays)

    def hlo(self, *args: Any) -> str:
        """The optimized HLO text of the program ``args`` run (compiled already if it ran)."""
        return self.lower(*args).compile().as_text()

    def compilations(self) -> int:
        """How many programs this function has compiled (one per static part and shape)."""
        return sum(program.jitted._cache_size() for program in self._cache.values())


def init_sharded(
    fn: Callable[..., PyTree],
    *args: Any,
    mesh: Mesh,
    shardings: PyTree,
    rules: Mapping[str, MeshAxes] | None = None,
) -> PyTree:
    """``fn(*args)`` computed directly into ``shardings`` on ``mesh``: no device (or host) ever
    holds an unsharded copy, so a model larger than one device can be initialised."""
    return MeshFunction(fn, mesh=mesh, rules=rules, out_shardings=shardings)(*args)
