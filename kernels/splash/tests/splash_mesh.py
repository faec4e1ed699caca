"""splash and ``xla`` on a 2x2 mesh of CPU devices, forward and gradients, in one process.

Usage: ``python splash_mesh.py SEED``, with ``XLA_FLAGS=--xla_force_host_platform_device_count=4``
and ``ZOO_SPLASH_INTERPRET=1`` (``test_splash_mesh.py`` sets both). Prints one JSON line: the
largest difference of each of out, dq, dk, dv, relative to ``max(1, max |xla|)``.
"""

from __future__ import annotations

import json
import sys

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

import zoo_attention


def main(seed: int) -> dict[str, float]:
    mesh = jax.make_mesh((2, 2), ("data", "model"), axis_types=(AxisType.Auto,) * 2)
    rng = np.random.default_rng(seed)
    heads = NamedSharding(mesh, P("data", None, "model", None))
    q = jax.device_put(jnp.asarray(rng.standard_normal((2, 256, 4, 64)), jnp.float32), heads)
    kv = jax.device_put(jnp.asarray(rng.standard_normal((2, 256, 2, 64)), jnp.float32), heads)
    do = jax.device_put(jnp.asarray(rng.standard_normal((2, 256, 4, 64)), jnp.float32), heads)
    # Two packed documents in the first row, one in the second.
    cut = int(rng.integers(1, 256))
    ids = jnp.asarray(np.stack([np.arange(256) >= cut, np.zeros(256, bool)]), jnp.int32)

    def attend(impl: str) -> tuple[jax.Array, ...]:
        def f(q: jax.Array, k: jax.Array, v: jax.Array) -> jax.Array:
            # Batch over `data`, heads over `model`: 2 query and 1 key/value head a device.
            with zoo_attention.partition_axes(batch="data", heads="model"):
                return zoo_attention.dot_product_attention(
                    q,
                    k,
                    v,
                    is_causal=True,
                    segment_ids=ids,
                    local_window_size=(40, 0),
                    logits_soft_cap=5.0,
                    implementation=impl,
                )

        out, vjp = jax.vjp(jax.jit(f), q, kv, kv)
        return (out, *vjp(do))

    with jax.set_mesh(mesh):
        got, want = attend("splash"), attend("xla")
    errors = {}
    for name, g, w in zip(("out", "dq", "dk", "dv"), got, want, strict=True):
        g64, w64 = np.asarray(g, np.float64), np.asarray(w, np.float64)
        errors[name] = float(np.max(np.abs(g64 - w64)) / max(1.0, float(np.max(np.abs(w64)))))
    return errors


if __name__ == "__main__":
    print(json.dumps(main(int(sys.argv[1]))))
