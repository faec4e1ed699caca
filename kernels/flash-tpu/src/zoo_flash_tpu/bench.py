"""Benchmark: ``python -m zoo_flash_tpu.bench [--compile-only] [--json PATH]``.

On a TPU it times forward and forward+backward of ``flash_tpu`` against ``xla`` and
``chunked`` (when installed) at several sequence lengths and reports TFLOP/s and % of the
chip's peak. Anywhere else (or with ``--compile-only``) it compiles the kernel ahead of time
for each TPU generation through libtpu's compile-only devices and reports the compiled
module's memory and cost-model figures.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np


def _parse_ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def _time(fn: Callable[[], Any], repeats: int) -> float:
    jax.block_until_ready(fn())  # compile and warm up
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(fn())
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def run_timing(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Time each kernel on the current TPU; model FLOPs count only the causal half."""
    import zoo_attention

    from ._policy import generation_for

    generation = generation_for(jax.devices()[0].device_kind)
    known = zoo_attention.kernels()
    rows = []
    rng = np.random.default_rng(0)
    b, n, k, h = args.batch, args.heads, args.kv_heads, args.head_dim
    for t in args.seq_lens:
        q = jnp.asarray(rng.standard_normal((b, t, n, h)), jnp.bfloat16)
        kv = jnp.asarray(rng.standard_normal((b, t, k, h)), jnp.bfloat16)
        fwd_flops = 4 * b * n * t * t * h * 0.5
        for impl in ("flash_tpu", "xla", "chunked"):
            if impl not in known:
                rows.append({"kernel": impl, "seq_len": t, "error": "not installed"})
                continue

            def attend(q: jax.Array, kv: jax.Array, impl: str = impl) -> jax.Array:
                return zoo_attention.dot_product_attention(
                    q, kv, kv, is_causal=True, implementation=impl
                )

            fwd = jax.jit(attend)
            both = jax.jit(
                jax.grad(lambda q, kv: jnp.sum(attend(q, kv).astype(jnp.float32)), (0, 1))
            )
            for label, fn, flops in (("fwd", fwd, fwd_flops), ("fwd+bwd", both, 3 * fwd_flops)):
                try:
                    seconds = _time(lambda fn=fn, q=q, kv=kv: fn(q, kv), args.repeats)
                except Exception as err:  # e.g. xla running out of HBM at long T
                    rows.append(
                        {"kernel": impl, "seq_len": t, "pass": label, "error": repr(err)[:120]}
                    )
                    continue
                tflops = flops / seconds / 1e12
                peak = generation.peak_bf16_flops
                rows.append(
                    {
                        "kernel": impl,
                        "seq_len": t,
                        "pass": label,
                        "ms": round(seconds * 1e3, 3),
                        "tflops": round(tflops, 2),
                        "pct_peak": round(100 * tflops * 1e12 / peak, 1) if peak else None,
                    }
                )
    return rows


def run_compile_only(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Compile per generation, head dim and pass; collect the compiled figures."""
    from ._aot import CompileCase, compile_case

    rows = []
    for generation in args.generations:
        for h in args.head_dims:
            for t in args.seq_lens:
                for backward, devices in itertools.product(
                    [p == "fwd+bwd" for p in args.passes], args.devices
                ):
                    case = CompileCase(
                        generation,
                        batch=args.batch,
                        seq_len=t,
                        num_heads=args.heads,
                        num_kv_heads=args.kv_heads,
                        head_dim=h,
                        segments=args.segments,
                        window=args.window,
                        soft_cap=args.soft_cap,
                        backward=backward,
                        devices=devices,
                    )
                    try:
                        rows.append(compile_case(case))
                    except Exception as err:
                        rows.append({"label": case.label, "error": repr(err)[:2000]})
                    print(_compile_line(rows[-1]), flush=True)
    return rows


def _compile_line(row: dict[str, Any]) -> str:
    if "error" in row:
        return f"{row['label']:<34} ERROR {row['error'][:200]}"
    ratio = row["temp_bytes"] * row["devices"] / row["score_matrix_bytes_global"]
    return (
        f"{row['label']:<34} temp {row['temp_bytes'] / 2**20:9.1f} MiB/device "
        f"({ratio:.2%} of the T² score matrix)  cost model {row['flops'] / 1e12:7.2f} TFLOP/device  "
        f"mosaic calls {row['mosaic_calls']}  compile {row['compile_s']:.1f}s"
    )


def _print_timing(rows: Sequence[dict[str, Any]]) -> None:
    print(f"{'kernel':<10} {'T':>7} {'pass':<8} {'ms':>9} {'TFLOP/s':>8} {'% peak':>7}")
    for r in rows:
        if "error" in r:
            print(f"{r['kernel']:<10} {r['seq_len']:>7} {r.get('pass', ''):<8} {r['error']}")
        else:
            print(
                f"{r['kernel']:<10} {r['seq_len']:>7} {r['pass']:<8} {r['ms']:>9.3f} "
                f"{r['tflops']:>8.2f} {r['pct_peak'] if r['pct_peak'] is not None else '-':>7}"
            )


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the process exit status."""
    parser = argparse.ArgumentParser(prog="python -m zoo_flash_tpu.bench", description=__doc__)
    parser.add_argument(
        "--compile-only", action="store_true", help="compile for TPU generations, never run"
    )
    parser.add_argument("--json", metavar="PATH", help="also write the rows as JSON to PATH")
    parser.add_argument(
        "--generations", type=lambda s: s.split(","), default=["v4", "v5e", "v5p", "v6e"]
    )
    parser.add_argument("--head-dims", type=_parse_ints, default=[64, 128, 256])
    parser.add_argument("--seq-lens", type=_parse_ints, default=None)
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--heads", type=int, default=16)
    parser.add_argument("--kv-heads", type=int, default=4)
    parser.add_argument("--head-dim", type=int, default=128, help="head dim of the timing runs")
    parser.add_argument("--segments", action="store_true", help="compile with segment ids too")
    parser.add_argument(
        "--window",
        type=lambda s: tuple(_parse_ints(s)),
        default=None,
        metavar="LEFT,RIGHT",
        help="compile with a local window",
    )
    parser.add_argument("--soft-cap", type=float, default=None, help="compile with a soft cap")
    parser.add_argument(
        "--devices",
        type=_parse_ints,
        default=[4],
        help="compile-only meshes: 4 (2x2 batch x heads, under shard_map) and/or 1 (one device)",
    )
    parser.add_argument(
        "--passes",
        type=lambda s: s.split(","),
        default=["fwd", "fwd+bwd"],
        help="compile-only passes: fwd, fwd+bwd or both",
    )
    parser.add_argument("--repeats", type=int, default=10)
    args = parser.parse_args(argv)
    on_tpu = jax.default_backend() == "tpu"
    if args.compile_only or not on_tpu:
        args.seq_lens = args.seq_lens or [8192]
        print(
            "compile-only: figures from libtpu's compiled modules (B, N, K as given, through "
            "zoo_attention.dot_product_attention on a 2x2 or 1-device mesh)"
        )
        rows = run_compile_only(args)
    else:
        args.seq_lens = args.seq_lens or [1024, 2048, 4096, 8192, 16384]
        rows = run_timing(args)
        _print_timing(rows)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                {
                    "mode": "compile-only" if not on_tpu or args.compile_only else "timing",
                    "rows": rows,
                },
                f,
                indent=1,
            )
    return 1 if any("error" in r and r.get("error") != "not installed" for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
