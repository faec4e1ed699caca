"""Compile ``zoo_attention.grouped.grouped_matmul(..., implementation="megablox")``, forward and
backward, for TPU generations through libtpu's compile-only devices; print one JSON row a
compile. Run by ``test_megablox_compile.py`` in the environment with libtpu.

Usage: python compile_worker.py SPEC[,SPEC...], a SPEC being GENERATION (a 2x2 mesh in
bfloat16, one device in bfloat16 and in float32) or GENERATION:DEVICES:DTYPE (one of them).
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
from jax.experimental import topologies
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from zoo_attention import grouped, recording

TOPOLOGIES = {"v4": "v4:2x2x1", "v5e": "v5e:2x2", "v5p": "v5p:2x2x1", "v6e": "v6e:2x2"}
# Mixtral-like expert widths, 4096 routed rows, 8 experts.
M, K, N, G = 4096, 1024, 3584, 8


def _compile(devices: list[Any], dtype: str) -> dict[str, Any]:
    mesh = Mesh(np_devices(devices), ("data", "model"))
    replicated = NamedSharding(mesh, P())
    args = (
        jax.ShapeDtypeStruct((M, K), dtype, sharding=replicated),
        jax.ShapeDtypeStruct((G, K, N), dtype, sharding=replicated),
        jax.ShapeDtypeStruct((G,), jnp.int32, sharding=replicated),
    )

    def loss(lhs: jax.Array, rhs: jax.Array, sizes: jax.Array) -> jax.Array:
        out = grouped.grouped_matmul(lhs, rhs, sizes, implementation="megablox")
        return jnp.sum(jnp.square(out.astype(jnp.float32)))

    start = time.perf_counter()
    with recording() as log, jax.set_mesh(mesh):
        compiled = jax.jit(jax.value_and_grad(loss, argnums=(0, 1))).lower(*args).compile()
    text = compiled.as_text()
    (res,) = log.grouped_matmul
    return {
        "mosaic_calls": text.count('custom_call_target="tpu_custom_call"'),
        "scope": grouped.scope_name(res.kernel, res.version) in text,
        "target": res.spec.platform,
        "temp_bytes": compiled.memory_analysis().temp_size_in_bytes,
        "compile_s": round(time.perf_counter() - start, 2),
    }


def np_devices(devices: list[Any]) -> Any:
    import numpy as np

    return np.asarray(devices).reshape(2, -1) if len(devices) == 4 else np.asarray(devices)[:, None]


PROGRAMS = ((4, "bfloat16"), (1, "bfloat16"), (1, "float32"))


def main(specs: list[str]) -> None:
    for spec in specs:
        generation, *one = spec.split(":")
        devices = list(topologies.get_topology_desc(TOPOLOGIES[generation], platform="tpu").devices)
        for count, dtype in [(int(one[0]), one[1])] if one else PROGRAMS:
            row: dict[str, Any] = {"generation": generation, "devices": count, "dtype": dtype}
            try:
                row.update(_compile(devices[:count], dtype))
            except Exception as err:  # reported, not raised: the test shows every failure
                row["error"] = f"{type(err).__name__}: {str(err).splitlines()[0][:300]}"
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main(sys.argv[1].split(","))
