"""Worker of the ``flash_versus`` benchmark: one attention kernel, compiled (or timed on a TPU).

Runs in the TPU environment (``.venv-tpu``, which has libtpu):
``python -m flash_versus_worker '{"kernel": "zoo", "chips": ["v5e"]}'``. ``zoo`` is whichever
``zoo_flash_tpu`` the interpreter imports (the editable installed version, or an earlier
release when the parent puts its unpacked wheel first on ``PYTHONPATH``); ``splash`` is JAX's
splash attention from the installed jax. Each ``compile`` request compiles one (chip, T, G,
pass) cell for one device of a libtpu compile-only topology and reports the compiled module's
memory; on a real TPU (``jax.devices()[0].platform == "tpu"``) it compiles for the local chip
instead and also times the call. ``plan`` asks a ``zoo`` version's own public policy for its
forward blocks.
"""

from __future__ import annotations

import functools
import inspect
import json
import re
import statistics
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
TOPOLOGIES = {"v5e": "v5e:2x2", "v6e": "v6e:2x2"}
BATCH, HEADS, HEAD_DIM = 2, 16, 128
DTYPE = jnp.bfloat16
SPEC = P("data", None, "model", None)  # [B, T, N, H] over a 1x1 (batch, heads) mesh
Attend = Callable[[jax.Array, jax.Array, jax.Array], jax.Array]


def on_tpu() -> bool:
    """Whether this process has a real TPU (then cells are compiled for it and timed)."""
    return jax.devices()[0].platform == "tpu"


@functools.cache
def mesh_for(chip: str) -> Mesh:
    """A 1x1 ``(data, model)`` mesh: the local TPU, or one compile-only device of ``chip``."""
    if on_tpu():
        devices = jax.devices()[:1]
    else:
        from jax.experimental import topologies

        devices = topologies.get_topology_desc(TOPOLOGIES[chip], platform="tpu").devices[:1]
    return Mesh(np.asarray(devices).reshape(1, 1), ("data", "model"))


def zoo_attend(mesh: Mesh, seq_len: int) -> Attend:
    """zoo_flash_tpu under ``shard_map``, blocks planned for the mesh's chip (both versions)."""
    import zoo_flash_tpu

    del seq_len  # zoo plans per call
    return lambda q, k, v: zoo_flash_tpu.sharded_flash_attention(q, k, v, mesh, is_causal=True)


@functools.cache
def _splash_kernel(seq_len: int) -> Any:
    from jax.experimental.pallas.ops.tpu import splash_attention as splash

    mask = splash.MultiHeadMask([splash.CausalMask((seq_len, seq_len))] * HEADS)
    # make_splash_mha takes K key/value heads with N % K == 0 (its index maps send query head
    # h to h // G): the variant for GQA; make_splash_mqa is only for a single key/value head.
    return splash.make_splash_mha(mask, head_shards=1, q_seq_shards=1)


def splash_attend(mesh: Mesh, seq_len: int) -> Attend:
    """Splash as a GQA user calls it from ``[B, T, N, H]``: scale, head-major, vmap over B."""
    kernel = _splash_kernel(seq_len)

    def local(q: jax.Array, k: jax.Array, v: jax.Array) -> jax.Array:
        # Splash takes [N, T, H] per sequence and applies no scale of its own.
        q = jnp.swapaxes(q * jnp.asarray(HEAD_DIM**-0.5, q.dtype), 1, 2)
        out = jax.vmap(kernel)(q, jnp.swapaxes(k, 1, 2), jnp.swapaxes(v, 1, 2))
        return jnp.swapaxes(out, 1, 2)

    return lambda q, k, v: jax.shard_map(
        local, mesh=mesh, in_specs=(SPEC, SPEC, SPEC), out_specs=SPEC, check_vma=False
    )(q, k, v)


ATTEND: dict[str, Callable[[Mesh, int], Attend]] = {"zoo": zoo_attend, "splash": splash_attend}


def _specs(mesh: Mesh, seq_len: int, group: int) -> tuple[jax.ShapeDtypeStruct, ...]:
    sharding = NamedSharding(mesh, SPEC)
    q = jax.ShapeDtypeStruct((BATCH, seq_len, HEADS, HEAD_DIM), DTYPE, sharding=sharding)
    kv = jax.ShapeDtypeStruct((BATCH, seq_len, HEADS // group, HEAD_DIM), DTYPE, sharding=sharding)
    return q, kv, kv


def _function(attend: Attend, backward: bool) -> Callable[..., Any]:
    if not backward:
        return attend

    def grads(q: jax.Array, k: jax.Array, v: jax.Array, d_out: jax.Array) -> tuple:
        # The cotangent is an input, as in training, so no harness temporary is counted.
        _, vjp = jax.vjp(attend, q, k, v)
        return vjp(d_out)

    return grads


def _time_ms(compiled: Any, specs: tuple[jax.ShapeDtypeStruct, ...], repeats: int = 10) -> float:
    """Median wall milliseconds of the compiled call on random inputs (real TPU only)."""
    keys = jax.random.split(jax.random.key(0), len(specs))
    args = [
        jax.device_put(jax.random.normal(key, s.shape, s.dtype), s.sharding)
        for key, s in zip(keys, specs, strict=True)
    ]
    jax.block_until_ready(compiled(*args))
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(compiled(*args))
        samples.append(time.perf_counter() - start)
    return 1e3 * statistics.median(samples)


def compile_cell(kernel: str, chip: str, seq_len: int, group: int, backward: bool) -> dict:
    """Compile one cell: set-up seconds, compile seconds (trace, lower, compile), memory.

    Set-up is what runs before tracing: splash's mask preprocessing (``make_splash_mha``,
    once per sequence length, then cached); zoo plans inside the trace.
    """
    mesh = mesh_for(chip)
    specs = _specs(mesh, seq_len, group)
    if backward:
        specs = (*specs, specs[0])
    start = time.perf_counter()
    fn = _function(ATTEND[kernel](mesh, seq_len), backward)
    set_up = time.perf_counter()
    with jax.set_mesh(mesh):
        compiled = jax.jit(fn).lower(*specs).compile()
    seconds = time.perf_counter() - set_up
    memory = compiled.memory_analysis()
    text = compiled.as_text()
    assert memory is not None and text is not None  # a TPU compile reports both
    out = {
        "setup_s": round(set_up - start, 2),
        "compile_s": round(seconds, 2),
        "temp_bytes": int(memory.temp_size_in_bytes),
        "argument_bytes": int(memory.argument_size_in_bytes),
        "output_bytes": int(memory.output_size_in_bytes),
        "mosaic_calls": len(re.findall(r'custom_call_target="tpu_custom_call"', text)),
    }
    if on_tpu():
        out["ms"] = round(_time_ms(compiled, specs), 3)
    return out


def zoo_plan(chip: str, seq_len: int, heads: int) -> dict[str, Any]:
    """This zoo_flash_tpu version's blocks for one forward of the cell, from its public policy
    (``generation_for``, ``choose_block_sizes``: in every release; before 0.2.0 it plans for one
    query head and takes no ``heads``)."""
    import zoo_flash_tpu as flash

    kind = mesh_for(chip).devices.flat[0].device_kind
    extra: dict[str, Any] = (
        {"heads": heads}
        if "heads" in inspect.signature(flash.choose_block_sizes).parameters
        else {}
    )
    b = flash.choose_block_sizes(
        flash.generation_for(kind), q_len=seq_len, kv_len=seq_len, head_dim=HEAD_DIM,
        itemsize=jnp.dtype(DTYPE).itemsize, **extra,
    )  # fmt: skip
    return {
        "device_kind": kind,
        "blocks": [b.block_q, b.block_kv, b.block_q_bwd, b.block_kv_bwd],
        "kv_compute": getattr(b, "block_kv_compute", None),
    }


def _hello(kernel: str, chips: list[str]) -> dict[str, Any]:
    if kernel == "zoo":
        import zoo_flash_tpu

        version, where = zoo_flash_tpu.__version__, zoo_flash_tpu.__file__
    else:
        version, where = jax.__version__, "jax.experimental.pallas.ops.tpu.splash_attention"
    device = jax.devices()[0]
    hello = {"kernel": kernel, "version": version, "module": where, "platform": device.platform}
    hello["device_kind"] = device.device_kind if on_tpu() else None
    # A small compile first, so the first reported cell does not carry libtpu's start-up.
    hello["warm_up"] = guarded(
        compile_cell, kernel=kernel, chip=chips[0], seq_len=1024, group=1, backward=False
    )
    return hello


def main() -> None:
    config = json.loads(sys.argv[1])
    kernel = config["kernel"]
    handlers = {
        "compile": lambda r: guarded(
            compile_cell, kernel=kernel, chip=r["chip"], seq_len=r["seq_len"],
            group=r["group"], backward=r["backward"],
        ),
        "plan": lambda r: guarded(zoo_plan, chip=r["chip"], seq_len=r["seq_len"], heads=r["heads"]),
    }  # fmt: skip
    serve(handlers, _hello(kernel, config["chips"]))


if __name__ == "__main__":
    main()
