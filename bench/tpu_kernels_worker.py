"""Worker of the ``tpu_kernels`` benchmark: one kernel, through zoo's contracts, compiled for
TPU generations this machine does not have.

Runs in the TPU environment (``.venv-tpu``, which has libtpu):
``python -m bench.tpu_kernels_worker '{"kind": "attention", "kernel": "splash"}'``. A
``compile`` request compiles one cell for one device of a libtpu compile-only topology through
the contract's public entry point (``zoo_attention.dot_product_attention`` or
``zoo_layers.grouped_matmul`` with ``implementation=`` the kernel), so what is compiled is
what a model gets, layout changes and ``shard_map`` included. It reports the compiled
executable's memory, XLA's cost model (FLOPs and bytes accessed) and the compile seconds.
"""

from __future__ import annotations

import functools
import json
import sys
import time
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from bench.harness import guarded, serve

#: Compile-only topology per chip; one of its devices is the target.
TOPOLOGIES = {"v4": "v4:2x2x1", "v5e": "v5e:2x2", "v5p": "v5p:2x2x1", "v6e": "v6e:2x2"}
ATTENTION = {"batch": 2, "heads": 16, "head_dim": 128}  # [B, T, N, H]; K = N / G
DTYPE = jnp.bfloat16


@functools.cache
def mesh_for(chip: str) -> Mesh:
    """A 1x1 ``(data, tensor)`` mesh of one compile-only device of ``chip``."""
    from jax.experimental import topologies

    devices = topologies.get_topology_desc(TOPOLOGIES[chip], platform="tpu").devices[:1]
    return Mesh(np.asarray(devices).reshape(1, 1), ("data", "tensor"))


def _struct(mesh: Mesh, shape: tuple[int, ...], dtype: Any = DTYPE) -> jax.ShapeDtypeStruct:
    return jax.ShapeDtypeStruct(shape, dtype, sharding=NamedSharding(mesh, P()))


def attention_cell(
    kernel: str, mesh: Mesh, seq_len: int, group: int
) -> tuple[Callable[..., Any], list[jax.ShapeDtypeStruct]]:
    """Causal attention of ``[B, T, N, H]`` queries over ``N / group`` key/value heads."""
    import zoo_attention

    b, n, h = ATTENTION["batch"], ATTENTION["heads"], ATTENTION["head_dim"]
    q = _struct(mesh, (b, seq_len, n, h))
    kv = _struct(mesh, (b, seq_len, n // group, h))

    def attend(q: jax.Array, k: jax.Array, v: jax.Array) -> jax.Array:
        return zoo_attention.dot_product_attention(q, k, v, is_causal=True, implementation=kernel)

    return attend, [q, kv, kv]


def grouped_cell(
    kernel: str, mesh: Mesh, rows: int, dims: tuple[int, int], groups: int
) -> tuple[Callable[..., Any], list[jax.ShapeDtypeStruct]]:
    """``rows`` token rows sorted into ``groups`` experts, each ``[K, N] = dims``."""
    import zoo_layers

    lhs = _struct(mesh, (rows, dims[0]))
    rhs = _struct(mesh, (groups, *dims))
    sizes = _struct(mesh, (groups,), jnp.int32)

    def multiply(lhs: jax.Array, rhs: jax.Array, group_sizes: jax.Array) -> jax.Array:
        return zoo_layers.grouped_matmul(lhs, rhs, group_sizes, implementation=kernel)

    return multiply, [lhs, rhs, sizes]


def _with_backward(fn: Callable[..., Any], differentiable: int) -> Callable[..., Any]:
    """``jax.vjp`` of ``fn`` in its first ``differentiable`` arguments; the cotangent is an
    input, as in training, so no harness temporary is counted."""

    def grads(*args: jax.Array) -> Any:
        *inputs, d_out = args
        live, rest = inputs[:differentiable], inputs[differentiable:]
        _, vjp = jax.vjp(lambda *xs: fn(*xs, *rest), *live)
        return vjp(d_out)

    return grads


def _cost(compiled: Any) -> dict[str, float]:
    cost = compiled.cost_analysis()
    cost = cost[0] if isinstance(cost, list) else cost or {}
    return {"flops": float(cost.get("flops", 0.0)), "bytes": float(cost.get("bytes accessed", 0.0))}


def compile_cell(kind: str, kernel: str, chip: str, backward: bool, **shape: Any) -> dict:
    """Compile one cell; its memory, XLA's cost model and the compile seconds."""
    mesh = mesh_for(chip)
    if kind == "attention":
        fn, specs = attention_cell(kernel, mesh, shape["seq_len"], shape["group"])
        differentiable = 3
    else:
        fn, specs = grouped_cell(kernel, mesh, shape["rows"], tuple(shape["dims"]), shape["groups"])
        differentiable = 2
    if backward:
        out = jax.eval_shape(fn, *specs)
        fn, specs = _with_backward(fn, differentiable), [*specs, _struct(mesh, out.shape)]
    start = time.perf_counter()
    with jax.set_mesh(mesh):
        compiled = jax.jit(fn).lower(*specs).compile()
    seconds = time.perf_counter() - start
    memory = compiled.memory_analysis()
    assert memory is not None  # a TPU compile reports it
    return {
        "compile_s": round(seconds, 2),
        "temp_bytes": int(memory.temp_size_in_bytes),
        "argument_bytes": int(memory.argument_size_in_bytes),
        "output_bytes": int(memory.output_size_in_bytes),
        "alias_bytes": int(memory.alias_size_in_bytes),
        "cost": _cost(compiled),
    }


def _hello(kind: str, kernel: str) -> dict[str, Any]:
    """The kernel's version as the contract's registry reports it; a small compile first, so
    the first reported cell does not carry libtpu's start-up."""
    if kind == "attention":
        import zoo_attention

        found: Any = zoo_attention.kernels().get(kernel)
        warm: dict[str, Any] = {"seq_len": 1024, "group": 1}
    else:
        import zoo_layers

        found = zoo_layers.moe.grouped_matmuls().get(kernel)
        warm = {"rows": 512, "dims": [256, 256], "groups": 2}
    hello: dict[str, Any] = {"kind": kind, "kernel": kernel, "jax": jax.__version__}
    hello["version"] = None if found is None else found.version
    hello["warm_up"] = guarded(compile_cell, kind=kind, kernel=kernel, chip="v5e",
                               backward=False, **warm)  # fmt: skip
    return hello


def main() -> None:
    config = json.loads(sys.argv[1])
    kind, kernel = config["kind"], config["kernel"]
    handlers = {
        "compile": lambda r: guarded(compile_cell, kind=kind, kernel=kernel, **r["cell"]),
    }
    serve(handlers, _hello(kind, kernel))


if __name__ == "__main__":
    main()
