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
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import equinox as eqx
import jax
from jax.sharding import Mesh
from jaxtyping import PyTree

import zoo_layers

from ._rules import MeshAxes
from ._shardings import is_array_like

# A sharding per positional argument: a tree of shardings (``None``: unspecified), or a
# function of the argument's array part returning one.
ShardingArg = PyTree | Callable[[PyTree], PyTree] | None


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


def _is_function(x: Any) -> bool:
    # A sharding tree may itself be callable (an Equinox model of shardings), so only plain
    # functions count as "compute the shardings from the arguments".
    return inspect.isfunction(x) or inspect.ismethod(x) or isinstance(x, functools.partial)


def _static_key(static: list[Any]) -> Any:
    leaves, treedef = jax.tree_util.tree_flatten(static)
    try:
        key = (treedef, tuple(leaves))
        hash(key)
    except TypeError:  # an unhashable static leaf: fall back to identity
        key = (treedef, tuple(id(leaf) for leaf in leaves))
    return key


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
        self._cache: dict[Any, tuple[Any, dict[str, Any]]] = {}

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

    def _prepare(self, args: tuple[Any, ...]) -> tuple[Any, list[PyTree], dict[str, Any]]:
        parts = [eqx.partition(a, is_array_like) for a in args]
        dyn = [p[0] for p in parts]
        static = [p[1] for p in parts]
        key = _static_key(static)
        if key not in self._cache:
            out_static: dict[str, Any] = {}

            def traced(*arrays: PyTree) -> PyTree:
                full = [eqx.combine(a, s) for a, s in zip(arrays, static, strict=True)]
                result = self.fn(*full)
                result_arrays, result_static = eqx.partition(result, eqx.is_array)
                out_static["value"] = result_static
                return result_arrays

            # The program is named after the function (`jit_step`), as profiles show it.
            traced.__name__ = getattr(self.fn, "__name__", traced.__name__)

            kwargs: dict[str, Any] = {
                "donate_argnums": self.donate,
                "compiler_options": self.compiler_options,
            }
            shardings = self._shardings_for(dyn)
            if shardings is not None:
                kwargs["in_shardings"] = shardings
            if self.mesh is not None and self.out_shardings is not None:
                out = self.out_shardings
                kwargs["out_shardings"] = out(*dyn) if _is_function(out) else out
            self._cache[key] = (jax.jit(traced, **kwargs), out_static)
        jitted, out_static = self._cache[key]
        return jitted, dyn, out_static

    def __call__(self, *args: Any) -> Any:
        jitted, dyn, out_static = self._prepare(args)
        with self.context():
            result = jitted(*dyn)
        return eqx.combine(result, out_static["value"])

    def lower(self, *args: Any) -> Any:
        """``jax.jit(...).lower`` on ``args`` (arrays or ``ShapeDtypeStruct`` leaves)."""
        jitted, dyn, _ = self._prepare(args)
        with self.context():
            return jitted.lower(*dyn)

    def hlo(self, *args: Any) -> str:
        """The optimized HLO text of the program ``args`` run (compiled already if it ran)."""
        return self.lower(*args).compile().as_text()

    def compilations(self) -> int:
        """How many programs this function has compiled (one per static part and shape)."""
        return sum(jitted._cache_size() for jitted, _ in self._cache.values())


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
