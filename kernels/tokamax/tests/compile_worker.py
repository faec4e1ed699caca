"""Compile ``zoo_attention.cross_entropy.linear_cross_entropy(..., implementation="tokamax")``,
the loss and its gradients, for TPU generations through libtpu's compile-only devices; print
one JSON row a compile. Run by ``test_tokamax_compile.py`` in the newest environment with
libtpu.

Usage: python compile_worker.py GENERATION[,GENERATION...]
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

from zoo_attention import cross_entropy, partition_axes, recording

TOPOLOGIES = {"v5e": "v5e:2x2", "v5p": "v5p:2x2x1", "v6e": "v6e:2x2"}
# Llama 3.2 1B's head: 8,192 tokens a device of width 2,048 against 128,256 tokens.
TOKENS, DIM, VOCAB = 8192, 2048, 128256


def _compile(devices: list[Any]) -> dict[str, Any]:
    mesh = Mesh(np.asarray(devices).reshape(len(devices)), ("fsdp",))
    rows = NamedSharding(mesh, P("fsdp"))
    args = (
        jax.ShapeDtypeStruct((TOKENS * len(devices), DIM), jnp.bfloat16, sharding=rows),
        jax.ShapeDtypeStruct((DIM, VOCAB), jnp.bfloat16, sharding=NamedSharding(mesh, P())),
        jax.ShapeDtypeStruct((TOKENS * len(devices),), jnp.int32, sharding=rows),
    )

    def loss(hidden: jax.Array, head: jax.Array, targets: jax.Array) -> jax.Array:
        ce, log_z = cross_entropy.linear_cross_entropy(
            hidden, head, targets, implementation="tokamax"
        )
        return jnp.sum(ce) + 1e-4 * jnp.sum(jnp.square(log_z))

    start = time.perf_counter()
    with recording() as log, jax.set_mesh(mesh), partition_axes(batch="fsdp"):
        step = jax.jit(jax.value_and_grad(loss, argnums=(0, 1)))
        compiled = step.lower(*args).compile()
    text = compiled.as_text()
    (res,) = log.cross_entropy
    return {
        "mosaic_calls": text.count('custom_call_target="tpu_custom_call"'),
        "scope": cross_entropy.scope_name(res.kernel, res.version) in text,
        "target": res.spec.platform,
        "device_kind": res.spec.device_kind,
        "temp_bytes": compiled.memory_analysis().temp_size_in_bytes,
        "logits_bytes": TOKENS * VOCAB * 4,
        "compile_s": round(time.perf_counter() - start, 2),
    }


def main() -> None:
    for generation in sys.argv[1].split(","):
        topology = topologies.get_topology_desc(TOPOLOGIES[generation], platform="tpu")
        row: dict[str, Any] = {"generation": generation, "devices": len(topology.devices)}
        try:
            row.update(_compile(list(topology.devices)))
        except Exception as err:  # reported as a row, so every generation is tried
            row["error"] = f"{type(err).__name__}: {str(err)[:400]}"
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
