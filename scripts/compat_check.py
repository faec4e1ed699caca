"""One kernel, one check, inside one environment of the compatibility matrix.

Usage: python compat_check.py conformance KERNEL   (JAX_PLATFORMS=cpu; interpret mode for TPU kernels)
       python compat_check.py compile KERNEL       (libtpu's compile-only devices)

Prints one JSON line: ``{"ok": bool, "error": first failure or null, ...}``. Runs with the
zoo-attention and kernel wheels installed in the environment, nothing from the tree.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time
import traceback
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
#: Kernels that serve only sequence lengths in multiples of a tile: they run each case with its
#: features unchanged and its lengths rounded up to the tile.
TILED = {"splash": 128}
#: TPU generations the forward and backward are compiled for (one chip of each topology).
GENERATIONS = {"v5e": "v5e:2x2", "v6e": "v6e:2x2"}
#: The compiled call: batch, length, query heads, key/value heads, head dim (bfloat16, causal).
SHAPE = (2, 2048, 8, 2, 128)


def _tiled(case: Any, tile: int) -> Any:
    def up(n: int) -> int:
        return -(-n // tile) * tile

    return dataclasses.replace(case, q_len=up(case.q_len), kv_len=up(case.kv_len))


def conformance(kernel: str) -> dict:
    from zoo_attention.testing import CASES, run_case

    cases = {c.name: _tiled(c, TILED.get(kernel, 1)) for c in CASES}
    seconds = {}
    for name in MATRIX_CASES:
        start = time.perf_counter()
        failures = run_case(kernel, cases[name])
        seconds[name] = round(time.perf_counter() - start, 2)
        if failures:
            return {"ok": False, "error": f"conformance {name}: {failures[0]}", "seconds": seconds}
    return {"ok": True, "error": None, "cases": list(MATRIX_CASES), "seconds": seconds}


def compile_for_tpu(kernel: str) -> dict:
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.experimental import topologies
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    import zoo_attention

    b, t, n, k, h = SHAPE

    def loss(q: jax.Array, key: jax.Array, value: jax.Array) -> jax.Array:
        out = zoo_attention.dot_product_attention(
            q, key, value, is_causal=True, implementation=kernel
        )
        return out.astype(jnp.float32).sum()

    figures = {}
    for generation, name in GENERATIONS.items():
        topology = topologies.get_topology_desc(name, platform="tpu")
        # One chip, in a mesh so the target (TPU, its generation) comes from the mesh.
        mesh = Mesh(np.asarray(topology.devices[:1]).reshape(1, 1), ("data", "model"))
        one = NamedSharding(mesh, P())
        q = jax.ShapeDtypeStruct((b, t, n, h), jnp.bfloat16, sharding=one)
        kv = jax.ShapeDtypeStruct((b, t, k, h), jnp.bfloat16, sharding=one)
        start = time.perf_counter()
        with jax.set_mesh(mesh):
            compiled = jax.jit(jax.grad(loss, argnums=(0, 1, 2))).lower(q, kv, kv).compile()
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
