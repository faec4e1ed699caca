"""Worker of the mesh benchmark: the real train step on a mesh of this process's devices.

``python -m bench.mesh_worker '{"model": {...}, "seq_len": 256, "batch": 16}'`` answers
``{"op": "measure", "mesh": "data=2,fsdp=2,tensor=2", "steps": 5}`` with the compile time, the
median step time and the collectives XLA put in the compiled step. The device count is the
process's (``XLA_FLAGS=--xla_force_host_platform_device_count=N`` set by the parent).
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from typing import Any

from .harness import serve


def main() -> None:
    import equinox as eqx
    import jax
    import numpy as np

    import zoo_models
    import zoo_train
    from zoo_train import parallel
    from zoo_train.aot import count_collectives
    from zoo_train.data import PackedLoader

    config = json.loads(sys.argv[1])
    model = zoo_models.get("llama-tiny").replace(**config["model"])
    rng = np.random.default_rng(0)
    vocab = model.vocab_size
    docs = [rng.integers(0, vocab - 1, rng.integers(20, 400)).astype(np.int32) for _ in range(400)]
    batch = PackedLoader(docs, seq_len=config["seq_len"], seed=0).next_batch(config["batch"])

    def measure(request: dict[str, Any]) -> dict[str, Any]:
        mesh = parallel.make_mesh(parallel.MeshConfig.parse(request["mesh"]))
        rules = parallel.make_rules()

        def build() -> Any:
            return zoo_models.build(model, key=jax.random.key(0))

        optimizer, schedule = zoo_train.make_optimizer(
            zoo_train.OptimizerConfig(), 100, eqx.filter_eval_shape(build)
        )

        def fresh() -> Any:
            return zoo_train.init_train_state(build(), optimizer)

        shardings = parallel.state_shardings(eqx.filter_eval_shape(fresh), optimizer, mesh, rules)
        state = parallel.init_sharded(fresh, mesh=mesh, shardings=shardings)
        step = zoo_train.make_train_step(
            optimizer, zoo_train.make_lm_loss(), schedule, mesh=mesh, rules=rules
        )
        start = time.perf_counter()
        compiled = step.lower(batch, state).compile()
        compile_s = time.perf_counter() - start
        collectives = count_collectives(compiled.as_text())
        state, metrics = step(batch, state)  # first call: compiles through the cache
        jax.block_until_ready(metrics)
        times = []
        for _ in range(request["steps"]):
            start = time.perf_counter()
            state, metrics = step(batch, state)
            jax.block_until_ready(metrics)
            times.append(time.perf_counter() - start)
        return {
            "mesh": parallel.describe_mesh(mesh),
            "devices": int(mesh.devices.size),
            "compile_s": compile_s,
            "step_s": statistics.median(times),
            "loss": float(metrics["loss"]),
            "collectives": collectives,
            "compilations": step.compilations(),
        }

    serve({"measure": measure}, {"devices": len(jax.devices())})


if __name__ == "__main__":
    main()
