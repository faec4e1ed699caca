"""flash_tpu compiled ahead of time for TPU generations from any host, or timed on a TPU.

``python kernels/flash-tpu/bench/flash_compile.py [--compile-only] [--json PATH] ...`` in an
environment with libtpu (``.venv-tpu``). Off a TPU (or with ``--compile-only``) it builds a 2x2
(batch x heads) mesh of libtpu's compile-only devices of each generation (or a mesh of one
device), lowers ``zoo_attention.dot_product_attention(..., implementation="flash_tpu")``
(forward, or forward and backward) on sharded ``ShapeDtypeStruct``s, compiles it with the real
Mosaic compiler and reports what the compiled module says about memory and cost. It goes
through the public contract, as a model does: the contract learns the TPU target from the mesh
and runs the kernel under ``shard_map`` over the batch and head axes. On a TPU it times forward
and forward+backward of ``flash_tpu`` against ``xla`` and ``chunked`` (when installed) and
reports TFLOP/s and % of the chip's peak. The ``flash_tpu`` benchmark and the kernel's compile
tests run it.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import itertools
import json
import re
import statistics
import sys
import time
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

import zoo_attention
import zoo_flash_tpu

#: Compile-only topology per generation (each has at least four devices for a 2x2 mesh).
TOPOLOGIES: dict[str, str] = {
    "v4": "v4:2x2x1",
    "v5e": "v5e:2x2",
    "v5p": "v5p:2x2x1",
    "v6e": "v6e:2x2",
}

KERNEL_NAMES = (
    "zoo_flash_tpu_forward",
    "zoo_flash_tpu_backward_delta",
    "zoo_flash_tpu_backward_dq",
    "zoo_flash_tpu_backward_dkdv",
)


@dataclasses.dataclass(frozen=True)
class CompileCase:
    """One ahead-of-time compile: shapes (global, before sharding) and features."""

    generation: str
    batch: int = 2
    seq_len: int = 8192
    num_heads: int = 16
    num_kv_heads: int = 4
    head_dim: int = 128
    dtype: str = "bfloat16"
    causal: bool = True
    segments: bool = False
    window: tuple[int, int] | None = None
    soft_cap: float | None = None
    backward: bool = False
    devices: int = 4
    sinks: bool = False
    value_head_dim: int | None = None

    @property
    def label(self) -> str:
        """Short name for tables."""
        parts = [self.generation, f"H={self.head_dim}", f"T={self.seq_len}"]
        if self.segments:
            parts.append("segments")
        if self.window is not None:
            parts.append(f"window={self.window}")
        if self.soft_cap is not None:
            parts.append(f"cap={self.soft_cap:g}")
        if self.value_head_dim is not None:
            parts.append(f"Hv={self.value_head_dim}")
        if self.sinks:
            parts.append("sinks")
        if self.devices == 1:
            parts.append("1 device")
        parts.append("fwd+bwd" if self.backward else "fwd")
        return " ".join(parts)


def _mesh(generation: str, devices: int) -> Mesh:
    from jax.experimental import topologies

    topology = topologies.get_topology_desc(TOPOLOGIES[generation], platform="tpu")
    shape = (2, 2) if devices == 4 else (1, 1)
    grid: np.ndarray = np.asarray(topology.devices[: shape[0] * shape[1]]).reshape(shape)
    return Mesh(grid, ("data", "model"))


def _flops(cost: Any) -> float:
    if isinstance(cost, list | tuple):
        cost = cost[0] if cost else {}
    return float(cost.get("flops", 0.0)) if cost else 0.0


def compile_case(case: CompileCase) -> dict[str, Any]:
    """Compile ``case`` and return its figures (all per device unless named ``global``).

    Keys: ``label``, ``generation``, ``device_kind``, ``compile_s``, ``temp_bytes``,
    ``argument_bytes``, ``output_bytes``, ``flops`` (XLA's cost model, which includes the
    kernels' ``CostEstimate``), ``mosaic_calls`` (``tpu_custom_call`` ops in the compiled HLO),
    ``kernels`` (our kernel names found in it), ``score_matrix_bytes_global``
    (``B·N·T²·4``, what a materialised float32 score matrix would take), ``devices``.
    """
    if case.devices not in (1, 4):
        raise ValueError(f"devices must be 1 or 4, got {case.devices}.")
    mesh = _mesh(case.generation, case.devices)
    dtype = jnp.dtype(case.dtype)
    b, t, n, k, h = case.batch, case.seq_len, case.num_heads, case.num_kv_heads, case.head_dim
    heads = NamedSharding(mesh, P("data", None, "model", None))
    q = jax.ShapeDtypeStruct((b, t, n, h), dtype, sharding=heads)
    kv = jax.ShapeDtypeStruct((b, t, k, h), dtype, sharding=heads)
    hv = h if case.value_head_dim is None else case.value_head_dim
    values = jax.ShapeDtypeStruct((b, t, k, hv), dtype, sharding=heads)
    out = jax.ShapeDtypeStruct((b, t, n, hv), dtype, sharding=heads)
    ids = jax.ShapeDtypeStruct((b, t), jnp.int32, sharding=NamedSharding(mesh, P("data", None)))
    sinks = jax.ShapeDtypeStruct((n,), jnp.float32, sharding=NamedSharding(mesh, P("model")))

    def attend(
        q: jax.Array, k: jax.Array, v: jax.Array, seg: jax.Array, sk: jax.Array
    ) -> jax.Array:
        with zoo_attention.partition_axes(batch="data", heads="model"):
            return zoo_attention.dot_product_attention(
                q,
                k,
                v,
                is_causal=case.causal,
                segment_ids=(seg, seg) if case.segments else None,
                local_window_size=case.window,
                logits_soft_cap=case.soft_cap,
                sinks=sk if case.sinks else None,
                implementation="flash_tpu",
            )

    def grads(
        q: jax.Array, k: jax.Array, v: jax.Array, seg: jax.Array, sk: jax.Array, d_out: jax.Array
    ) -> tuple[jax.Array, ...]:
        # The cotangent is an input, as in training, so no harness temporary is counted.
        _, vjp = jax.vjp(lambda q, k, v, sk: attend(q, k, v, seg, sk), q, k, v, sk)
        return vjp(d_out)

    start = time.perf_counter()
    # Four devices: under the mesh (the contract wraps the kernel in shard_map). One device: no
    # mesh context, only the inputs' shardings name the TPU target, and the kernel is called
    # directly (outside shard_map and outside any mesh).
    with jax.set_mesh(mesh) if case.devices > 1 else contextlib.nullcontext():
        if case.backward:
            lowered = jax.jit(grads).lower(q, kv, values, ids, sinks, out)
        else:
            lowered = jax.jit(attend).lower(q, kv, values, ids, sinks)
        lowered_text = lowered.as_text()
        compiled = lowered.compile()
    seconds = time.perf_counter() - start
    memory = compiled.memory_analysis()
    text = compiled.as_text()
    assert memory is not None and text is not None  # a TPU compile reports both
    return {
        "label": case.label,
        "generation": case.generation,
        "device_kind": mesh.devices.flat[0].device_kind,
        "head_dim": h,
        "seq_len": t,
        "backward": case.backward,
        "segments": case.segments,
        "window": case.window,
        "soft_cap": case.soft_cap,
        "sinks": case.sinks,
        "value_head_dim": hv,
        "devices": int(mesh.devices.size),
        "shard_map": "shard_map" in lowered_text or "sdy.manual_computation" in lowered_text,
        "compile_s": round(seconds, 2),
        "temp_bytes": int(memory.temp_size_in_bytes),
        "argument_bytes": int(memory.argument_size_in_bytes),
        "output_bytes": int(memory.output_size_in_bytes),
        "flops": _flops(compiled.cost_analysis()),
        "mosaic_calls": len(re.findall(r"custom_call_target=\"tpu_custom_call\"", text)),
        "kernels": [name for name in KERNEL_NAMES if name in text],
        "score_matrix_bytes_global": b * n * t * t * 4,
    }


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def run_timing(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Time each kernel on the current TPU (median of ``args.repeats`` after a warm-up call);
    model FLOPs count only the causal half."""
    peak = zoo_flash_tpu.generation_for(jax.devices()[0].device_kind).peak_bf16_flops
    known, rows = zoo_attention.kernels(), []
    rng = np.random.default_rng(0)
    b, n, k, h = args.batch, args.heads, args.kv_heads, args.head_dim
    for t, impl in itertools.product(args.seq_lens, ("flash_tpu", "xla", "chunked")):
        if impl not in known:
            rows.append({"kernel": impl, "seq_len": t, "error": "not installed"})
            continue
        q = jnp.asarray(rng.standard_normal((b, t, n, h)), jnp.bfloat16)
        kv = jnp.asarray(rng.standard_normal((b, t, k, h)), jnp.bfloat16)

        def attend(q: jax.Array, kv: jax.Array, impl: str = impl) -> jax.Array:
            return zoo_attention.dot_product_attention(
                q, kv, kv, is_causal=True, implementation=impl
            )

        loss = lambda q, kv, attend=attend: jnp.sum(attend(q, kv).astype(jnp.float32))
        fwd_flops = 4 * b * n * t * t * h * 0.5
        for label, fn, flops in (
            ("fwd", jax.jit(attend), fwd_flops),
            ("fwd+bwd", jax.jit(jax.grad(loss, (0, 1))), 3 * fwd_flops),
        ):
            row: dict[str, Any] = {"kernel": impl, "seq_len": t, "pass": label}
            try:
                jax.block_until_ready(fn(q, kv))  # compile and warm up
                samples = []
                for _ in range(args.repeats):
                    start = time.perf_counter()
                    jax.block_until_ready(fn(q, kv))
                    samples.append(time.perf_counter() - start)
            except Exception as err:  # e.g. xla running out of HBM at long T
                rows.append({**row, "error": repr(err)[:120]})
                continue
            seconds = statistics.median(samples)
            row.update(ms=round(seconds * 1e3, 3), tflops=round(flops / seconds / 1e12, 2))
            row["pct_peak"] = round(100 * flops / seconds / peak, 1) if peak else None
            rows.append(row)
            print(row, flush=True)
    return rows


def run_compile_only(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Compile per generation, head dim, length, pass and mesh; collect the compiled figures."""
    rows = []
    for generation, h, t, backward, devices in itertools.product(
        args.generations, args.head_dims, args.seq_lens,
        [p == "fwd+bwd" for p in args.passes], args.devices,
    ):  # fmt: skip
        case = CompileCase(
            generation, batch=args.batch, seq_len=t, num_heads=args.heads,
            num_kv_heads=args.kv_heads, head_dim=h, segments=args.segments, window=args.window,
            soft_cap=args.soft_cap, backward=backward, devices=devices, sinks=args.sinks,
            value_head_dim=args.value_head_dim,
        )  # fmt: skip
        try:
            rows.append(compile_case(case))
        except Exception as err:
            rows.append({"label": case.label, "error": repr(err)[:2000]})
        print(rows[-1], flush=True)
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the process exit status (1 if a case failed)."""
    parser = argparse.ArgumentParser(prog="flash_compile.py", description=__doc__)
    add = parser.add_argument
    add("--compile-only", action="store_true", help="compile for TPU generations, never run")
    add("--json", metavar="PATH", help="also write the rows as JSON to PATH")
    add("--generations", type=lambda s: s.split(","), default=list(TOPOLOGIES))
    add("--head-dims", type=_ints, default=[64, 128, 256])
    add("--seq-lens", type=_ints, default=None)
    add("--batch", type=int, default=2)
    add("--heads", type=int, default=16)
    add("--kv-heads", type=int, default=4)
    add("--head-dim", type=int, default=128, help="head dim of the timing runs")
    add("--segments", action="store_true", help="compile with segment ids too")
    add("--window", type=lambda s: tuple(_ints(s)), metavar="LEFT,RIGHT", help="a local window")
    add("--soft-cap", type=float, help="compile with a soft cap")
    add("--sinks", action="store_true", help="compile with attention sinks (contract 1.3)")
    add("--value-head-dim", type=int, help="the values' head dim, when not the queries'")
    add("--devices", type=_ints, default=[4],
        help="compile-only meshes: 4 (2x2 batch x heads, under shard_map) and/or 1 (one device)")  # fmt: skip
    add("--passes", type=lambda s: s.split(","), default=["fwd", "fwd+bwd"],
        help="compile-only passes: fwd, fwd+bwd or both")  # fmt: skip
    add("--repeats", type=int, default=10)
    args = parser.parse_args(argv)
    compile_only = args.compile_only or jax.default_backend() != "tpu"
    if compile_only:
        args.seq_lens = args.seq_lens or [8192]
        rows = run_compile_only(args)
    else:
        args.seq_lens = args.seq_lens or [1024, 2048, 4096, 8192, 16384]
        rows = run_timing(args)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                {"mode": "compile-only" if compile_only else "timing", "rows": rows}, f, indent=1
            )
    return 1 if any("error" in r and r["error"] != "not installed" for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
