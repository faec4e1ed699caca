"""One attention measurement in its own process (``python -m bench.attention_worker``).

Config (JSON argv[1]): ``implementation``, ``seq_len``, ``batch``, ``heads``, ``head_dim``,
``repeats``, ``cap_bytes``, ``execute`` (false: compile and check memory only). Compiles the forward and the forward+backward (a VJP with a fixed
random cotangent) ahead of time, reads XLA's ``memory_analysis()``, and only runs a function
whose arguments, outputs and temporaries fit under the cap; the address space is capped as
well, so an allocation past it fails in this process instead of taking the machine down. The
process's peak RSS (``ru_maxrss``) is read after the forward and again after the
forward+backward (which needs at least as much memory), so each phase's peak is its own.
Writes one JSON line on the original stdout.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time
from typing import Any

# Address space beyond the RSS cap: the runtime maps about 1.5 GiB it never touches.
_AS_HEADROOM = 3 * 2**30


def _rss_peak_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux reports KiB


def _memory(compiled: Any) -> dict[str, int | None]:
    try:
        m = compiled.memory_analysis()
    except Exception:  # not every backend implements it
        return {"temp": None, "argument": None, "output": None}
    return {
        "temp": int(m.temp_size_in_bytes),
        "argument": int(m.argument_size_in_bytes),
        "output": int(m.output_size_in_bytes),
    }


def _measure(
    name: str, fn: Any, args: tuple, repeats: int, cap: int, execute: bool
) -> dict[str, Any]:
    import jax

    start = time.perf_counter()
    import zoo_train

    # Compiled as zoo's train step is, so these are the times training sees.
    options = zoo_train.step_compiler_options()
    compiled = jax.jit(fn, compiler_options=options).lower(*args).compile()
    compile_s = time.perf_counter() - start
    memory = _memory(compiled)
    need = sum(v for v in memory.values() if v is not None)
    out: dict[str, Any] = {"phase": name, "compile_s": compile_s, "xla_memory": memory}
    if need > cap:
        out["status"] = "oom"
        out["reason"] = f"XLA needs {need / 2**30:.1f} GiB > cap {cap / 2**30:.1f} GiB"
        return out
    if not execute:
        out["status"] = "skipped"
        out["reason"] = f"fits ({need / 2**30:.1f} GiB) but the sweep's time budget is spent"
        return out
    times = []
    try:
        for _ in range(repeats):
            start = time.perf_counter()
            jax.block_until_ready(compiled(*args))
            times.append(time.perf_counter() - start)
    except (MemoryError, jax.errors.JaxRuntimeError) as err:
        out["status"] = (
            "oom" if "memory" in str(err).lower() or isinstance(err, MemoryError) else "error"
        )
        out["reason"] = str(err).splitlines()[0][:200]
        return out
    out["status"] = "ok"
    out["times_s"] = times
    out["peak_rss_bytes"] = _rss_peak_bytes()
    return out


def main() -> None:
    config = json.loads(sys.argv[1])
    channel = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    cap = int(config["cap_bytes"])
    resource.setrlimit(resource.RLIMIT_AS, (cap + _AS_HEADROOM, cap + _AS_HEADROOM))

    import jax
    import jax.numpy as jnp

    import zoo_attention

    impl = config["implementation"]
    shape = (config["batch"], config["seq_len"], config["heads"], config["head_dim"])
    keys = jax.random.split(jax.random.key(config["seq_len"]), 4)
    q, k, v, ct = (jax.random.normal(key, shape, jnp.float32) for key in keys)

    # "linear:NAME": the gated delta rule (gated DeltaNet's linear attention) through the
    # linear-attention kernel NAME, at the same shape: a fixed decay and write strength, queries
    # and keys L2-normalised as Qwen3.5 calls it.
    linear = impl.removeprefix("linear:") if impl.startswith("linear:") else None
    log_decay = jnp.full(shape[:3], -0.05, jnp.float32)
    beta = jnp.full(shape[:3], 0.5, jnp.float32)

    def forward(q: jax.Array, k: jax.Array, v: jax.Array) -> jax.Array:
        if linear is not None:
            out, _ = zoo_attention.linear.gated_delta_rule(
                q, k, v, log_decay, beta, normalize_qk=True, implementation=linear
            )
            return out
        return zoo_attention.dot_product_attention(q, k, v, is_causal=True, implementation=impl)

    def forward_backward(q: jax.Array, k: jax.Array, v: jax.Array, ct: jax.Array) -> tuple:
        out, vjp = jax.vjp(forward, q, k, v)
        return out, vjp(ct)

    jax.block_until_ready((q, k, v, ct))
    result: dict[str, Any] = {"config": config, "baseline_rss_bytes": _rss_peak_bytes()}
    repeats = int(config["repeats"])
    execute = bool(config.get("execute", True))
    result["forward"] = _measure("forward", forward, (q, k, v), repeats, cap, execute)
    result["forward_backward"] = _measure(
        "forward+backward", forward_backward, (q, k, v, ct), repeats, cap, execute
    )
    channel.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
