"""One kernel, one check, inside one environment of the compatibility matrix.

Usage: python compat_check.py conformance KERNEL   (JAX_PLATFORMS=cpu; interpret mode for TPU kernels)
       python compat_check.py compile KERNEL       (libtpu's compile-only devices)

A grouped-matmul kernel (:data:`GROUPED_MATMUL_KERNELS`) is checked on its own contract: every
case of ``zoo_attention.grouped.testing``, and a grouped matmul of :data:`GROUPED_SHAPE`; a
linear-attention kernel (:data:`LINEAR_ATTENTION_KERNELS`) on every case of
``zoo_attention.linear.testing``, and a gated delta rule of :data:`LINEAR_SHAPE`; a
cross-entropy kernel (:data:`CROSS_ENTROPY_KERNELS`) every case of
``zoo_attention.cross_entropy.testing`` it serves, and a loss of :data:`CROSS_ENTROPY_SHAPE`.

Prints one JSON line: ``{"ok": bool, "error": first failure or null, ...}``. Runs with the
zoo-attention and kernel wheels installed in the environment, nothing from the tree.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any

#: The conformance cases every kernel version is checked on: each contract feature (causal,
#: packed segments, windows, soft cap, GQA/MQA, rows that see nothing, cross attention, padded
#: tails) in float32 and bfloat16, forward and gradients, with fresh random inputs.
MATRIX_CASES = (
    "causal-bf16",
    "segments-f32",
    "window-left-right-f32",
    "softcap-f32",
    "gqa4-causal-bf16",
    "cross-q33-kv97-segments",
    "empty-rows-causal-segments-bf16",
    "all-f32",
)
#: Contract 1.3's features and a case of each (with zoo-attention >= 1.3): a kernel that serves
#: it must pass the case; one that does not must refuse it naming the feature.
FEATURE_CASES = {"sinks": "sinks-all-f32", "value_head_dim": "mla-qk192-v128-causal"}
#: TPU generations the forward and backward are compiled for (one chip of each topology).
GENERATIONS = {"v5e": "v5e:2x2", "v6e": "v6e:2x2"}
#: The compiled call: batch, length, query heads, key/value heads, head dim (bfloat16, causal).
SHAPE = (2, 2048, 8, 2, 128)
#: Kernels that serve only sequence lengths in multiples of a tile: against a zoo-attention
#: before 1.2, whose suite does not tile cases itself, each case runs with its features
#: unchanged and its lengths rounded up to the tile.
TILED = {"splash": 128}
#: The kernels of the grouped-matmul contract (the others are attention kernels).
GROUPED_MATMUL_KERNELS = ("megablox",)
#: The compiled grouped matmul: rows M, contracting K, output N, groups G (bfloat16).
GROUPED_SHAPE = (4096, 1024, 3584, 8)
#: The kernels of the linear-attention contract.
LINEAR_ATTENTION_KERNELS = ("deltanet_tpu",)
#: The compiled gated delta rule: batch, length, query/key heads, value heads, key and value
#: widths (bfloat16; Qwen3.5-9B's DeltaNet).
LINEAR_SHAPE = (1, 2048, 16, 32, 128, 128)
#: The kernels of the fused linear cross-entropy contract.
CROSS_ENTROPY_KERNELS = ("tokamax",)
#: The compiled cross entropy: tokens N, width D, vocabulary V (bfloat16, a [D, V] head).
CROSS_ENTROPY_SHAPE = (8192, 2048, 128256)


def _tiled(case: Any, tile: int) -> Any:
    def up(n: int) -> int:
        return -(-n // tile) * tile

    return dataclasses.replace(case, q_len=up(case.q_len), kv_len=up(case.kv_len))


def conformance(kernel: str) -> dict:
    """The matrix's attention cases, or every grouped-matmul case, against ``kernel``."""
    if kernel in GROUPED_MATMUL_KERNELS or kernel in LINEAR_ATTENTION_KERNELS:
        kind = "grouped" if kernel in GROUPED_MATMUL_KERNELS else "linear"
        suite: Any = importlib.import_module(f"zoo_attention.{kind}.testing")
        cases = list(suite.CASES)
    elif kernel in CROSS_ENTROPY_KERNELS:
        suite = importlib.import_module("zoo_attention.cross_entropy.testing")
        cases = [c for c in suite.CASES if suite.refusal(kernel, c) is None]
    else:
        suite = importlib.import_module("zoo_attention.testing")
        by_name = {c.name: c for c in suite.CASES}
        # From zoo-attention 1.2 the suite runs a case at lengths the kernel serves by itself
        # (its `sequence_tile`); before, the matrix rounds them here.
        tile = 1 if hasattr(suite, "tiled") else TILED.get(kernel, 1)
        cases = [_tiled(by_name[name], tile) for name in MATRIX_CASES]
    seconds = {}
    for case in cases:
        start = time.perf_counter()
        failures = suite.run_case(kernel, case)
        seconds[case.name] = round(time.perf_counter() - start, 2)
        if failures:
            error = f"conformance {case.name}: {failures[0]}"
            return {"ok": False, "error": error, "seconds": seconds}
    result: dict[str, Any] = {
        "ok": True,
        "error": None,
        "cases": [c.name for c in cases],
        "seconds": seconds,
    }
    if kernel not in GROUPED_MATMUL_KERNELS:
        result["serves"] = features_served(suite, kernel)
    return result


def features_served(suite: Any, kernel: str) -> dict[str, bool] | None:
    """Which of contract 1.3's features the kernel serves (``None``: the installed
    zoo-attention predates contract 1.3). A served feature's case runs like the others (its
    failure raises); a refused one passes only by a refusal that names it."""
    by_name = {c.name: c for c in suite.CASES}
    if not hasattr(suite, "refusal") or not set(FEATURE_CASES.values()) <= set(by_name):
        return None
    served = {}
    for feature, name in FEATURE_CASES.items():
        case = by_name[name]
        served[feature] = suite.refusal(kernel, case) is None
        failures = suite.run_case(kernel, case)
        if failures:
            raise AssertionError(f"conformance {name}: {failures[0]}")
    return served


def _attention_call(kernel: str, sharding: Any) -> tuple[Callable[..., Any], list[Any]]:
    """The attention call compiled (a loss of q, k, v) and its abstract arguments."""
    import jax
    import jax.numpy as jnp

    import zoo_attention

    b, t, n, k, h = SHAPE

    def loss(q: Any, key: Any, value: Any) -> Any:
        out = zoo_attention.dot_product_attention(
            q, key, value, is_causal=True, implementation=kernel
        )
        return out.astype(jnp.float32).sum()

    q = jax.ShapeDtypeStruct((b, t, n, h), jnp.bfloat16, sharding=sharding)
    kv = jax.ShapeDtypeStruct((b, t, k, h), jnp.bfloat16, sharding=sharding)
    return loss, [q, kv, kv]


def _grouped_call(kernel: str, sharding: Any) -> tuple[Callable[..., Any], list[Any]]:
    """The grouped matmul compiled (a loss of lhs, rhs; some groups empty, rows past them) and
    its abstract arguments."""
    import jax
    import jax.numpy as jnp

    from zoo_attention import grouped

    m, k, n, g = GROUPED_SHAPE

    def loss(lhs: Any, rhs: Any) -> Any:
        sizes = jnp.asarray([m // 8, 0, m // 4, m // 8, 0, m // 4, m // 8, 0], jnp.int32)[:g]
        out = grouped.grouped_matmul(lhs, rhs, sizes, implementation=kernel)
        return out.astype(jnp.float32).sum()

    lhs = jax.ShapeDtypeStruct((m, k), jnp.bfloat16, sharding=sharding)
    rhs = jax.ShapeDtypeStruct((g, k, n), jnp.bfloat16, sharding=sharding)
    return loss, [lhs, rhs]


def _linear_call(kernel: str, sharding: Any) -> tuple[Callable[..., Any], list[Any]]:
    """The gated delta rule compiled (a loss of q, k, v, decay, beta) and its abstract
    arguments."""
    import jax
    import jax.numpy as jnp

    from zoo_attention import linear

    b, t, k, n, dk, dv = LINEAR_SHAPE

    def loss(q: Any, key: Any, value: Any, g: Any, beta: Any) -> Any:
        out, state = linear.gated_delta_rule(
            q, key, value, g, beta, normalize_qk=True, implementation=kernel
        )
        return out.astype(jnp.float32).sum() + state.sum()

    f = jax.ShapeDtypeStruct
    qk = f((b, t, k, dk), jnp.bfloat16, sharding=sharding)
    scalars = f((b, t, n), jnp.float32, sharding=sharding)
    return loss, [qk, qk, f((b, t, n, dv), jnp.bfloat16, sharding=sharding), scalars, scalars]


def _cross_entropy_call(kernel: str, sharding: Any) -> tuple[Callable[..., Any], list[Any]]:
    """The cross entropy compiled (a loss of the hidden states and a [D, V] head, with a
    z-loss) and its abstract arguments."""
    import jax
    import jax.numpy as jnp

    from zoo_attention import cross_entropy

    n, d, v = CROSS_ENTROPY_SHAPE

    def loss(hidden: Any, head: Any) -> Any:
        targets = jnp.arange(n, dtype=jnp.int32) % v
        ce, log_z = cross_entropy.linear_cross_entropy(hidden, head, targets, implementation=kernel)
        return ce.sum() + 1e-4 * jnp.square(log_z).sum()

    hidden = jax.ShapeDtypeStruct((n, d), jnp.bfloat16, sharding=sharding)
    head = jax.ShapeDtypeStruct((d, v), jnp.bfloat16, sharding=sharding)
    return loss, [hidden, head]


def compile_for_tpu(kernel: str) -> dict:
    import jax
    import numpy as np
    from jax.experimental import topologies
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    call = (
        _grouped_call
        if kernel in GROUPED_MATMUL_KERNELS
        else _linear_call
        if kernel in LINEAR_ATTENTION_KERNELS
        else _cross_entropy_call
        if kernel in CROSS_ENTROPY_KERNELS
        else _attention_call
    )
    figures = {}
    for generation, name in GENERATIONS.items():
        topology = topologies.get_topology_desc(name, platform="tpu")
        # One chip, in a mesh so the target (TPU, its generation) comes from the mesh.
        mesh = Mesh(np.asarray(topology.devices[:1]).reshape(1, 1), ("data", "model"))
        loss, args = call(kernel, NamedSharding(mesh, P()))
        start = time.perf_counter()
        with jax.set_mesh(mesh):
            grad = jax.grad(loss, argnums=tuple(range(len(args))))
            compiled = jax.jit(grad).lower(*args).compile()
        text = compiled.as_text()
        assert text is not None  # a TPU executable always has its HLO text
        figures[generation] = {
            "seconds": round(time.perf_counter() - start, 2),
            "mosaic": "tpu_custom_call" in text,
        }
    return {"ok": True, "error": None, "compiled": figures}


def main(argv: list[str]) -> int:
    check, kernel = argv
    try:
        result = (conformance if check == "conformance" else compile_for_tpu)(kernel)
    except Exception as err:  # the first error is the finding
        last = traceback.extract_tb(err.__traceback__)[-1]
        where = f" (at {last.filename.rsplit('/', 2)[-1]}:{last.lineno})"
        message = str(err).strip().splitlines()[0] if str(err).strip() else ""
        result = {"ok": False, "error": f"{check}: {type(err).__name__}: {message}{where}"}
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
