"""Compile ``zoo_attention.linear.gated_delta_rule(..., implementation="deltanet_tpu")``,
forward and backward, for TPU generations through libtpu's compile-only devices; print one JSON
row a compile. Run by ``test_deltanet_compile.py`` in the environment with libtpu, and by the
benchmarks (``bench/deltanet.py``) for the compiled memory.

Usage: python compile_worker.py GENERATION[,GENERATION...] [SEQ_LEN[,SEQ_LEN...]]
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

os.environ.setdefault("TPU_WORKER_HOSTNAMES", "localhost")
os.environ.setdefault("TPU_ACCELERATOR_TYPE", "v5litepod-4")
os.environ.setdefault("TPU_SKIP_MDS_QUERY", "1")
os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import topologies
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from zoo_attention import linear, recording

TOPOLOGIES = {"v5e": "v5e:2x2", "v5p": "v5p:2x2x1", "v6e": "v6e:2x2"}
# Qwen3.5-9B's gated DeltaNet: 16 query/key heads, 32 value heads, widths of 128.
K, N, DK, DV = 16, 32, 128, 128


def _compile(devices: list[Any], seq_len: int, implementation: str) -> dict[str, Any]:
    mesh = Mesh(np.asarray(devices).reshape(len(devices), 1), ("data", "model"))
    rows = NamedSharding(mesh, P("data"))
    b = len(devices)  # one row a device
    f = jax.ShapeDtypeStruct
    args = (
        f((b, seq_len, K, DK), jnp.bfloat16, sharding=rows),
        f((b, seq_len, K, DK), jnp.bfloat16, sharding=rows),
        f((b, seq_len, N, DV), jnp.bfloat16, sharding=rows),
        f((b, seq_len, N), jnp.float32, sharding=rows),
        f((b, seq_len, N), jnp.bfloat16, sharding=rows),
    )

    def loss(*a: jax.Array) -> jax.Array:
        out, state = linear.gated_delta_rule(*a, normalize_qk=True, implementation=implementation)
        return jnp.sum(out.astype(jnp.float32) ** 2) + jnp.sum(state)

    start = time.perf_counter()
    with recording() as log, jax.set_mesh(mesh):
        compiled = jax.jit(jax.grad(loss, argnums=(0, 1, 2, 3, 4))).lower(*args).compile()
    text = compiled.as_text()
    (res,) = log.linear_attention
    memory = compiled.memory_analysis()
    return {
        "mosaic_calls": text.count('custom_call_target="tpu_custom_call"'),
        "scope": linear.scope_name(res.kernel, res.version) in text,
        "target": res.spec.platform,
        "temp_bytes": memory.temp_size_in_bytes,
        "argument_bytes": memory.argument_size_in_bytes,
        "compile_s": round(time.perf_counter() - start, 2),
    }


def main(generations: list[str], lengths: list[int], implementations: list[str]) -> None:
    for generation in generations:
        devices = list(topologies.get_topology_desc(TOPOLOGIES[generation], platform="tpu").devices)
        for implementation in implementations:
            for seq_len in lengths:
                row: dict[str, Any] = {"generation": generation, "seq_len": seq_len,
                                       "implementation": implementation}  # fmt: skip
                try:
                    row.update(_compile(devices, seq_len, implementation))
                except Exception as err:  # reported, not raised: the test shows every failure
                    row["error"] = f"{type(err).__name__}: {str(err).splitlines()[0][:300]}"
                print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main(
        sys.argv[1].split(","),
        [int(x) for x in (sys.argv[2] if len(sys.argv) > 2 else "4096").split(",")],
        (sys.argv[3] if len(sys.argv) > 3 else "deltanet_tpu").split(","),
    )
