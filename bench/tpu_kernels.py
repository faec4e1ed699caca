"""The TPU kernels side by side, through zoo's contracts: which should be the default on TPU.

Attention: ``flash_tpu`` (zoo's Pallas kernel), ``splash`` (JAX's splash attention behind the
contract) and ``xla`` (the reference), on the same causal cells. Grouped matmul: ``megablox``
(JAX's Pallas grouped matmul) and ``ragged_dot`` (XLA's), on the experts of published MoE
models. No TPU here, so every figure is from libtpu's compile-only devices or modelled, and is
labelled: the compiled executable's memory (temporaries, and the peak they make with the
arguments and outputs), XLA's cost model of the compiled program (FLOPs, bytes accessed),
compile seconds, and for the two Pallas attention kernels their own model of one forward's HBM
traffic from their block sizes and grid. One worker per kernel (:mod:`tpu_kernels_worker`) in
the TPU environment.
"""

from __future__ import annotations

import dataclasses
import sys
import time
from typing import Any

from .harness import (
    ROOT,
    TPU_PYTHON,
    Worker,
    new_result,
    table,
    tpu_environment_missing,
    unavailable,
)

NAME = "tpu_kernels"
TITLE = "TPU kernels through the contracts: flash_tpu vs splash vs xla, megablox vs ragged_dot"
MiB, GiB = 2**20, 2**30
ATTENTION_KERNELS = ("flash_tpu", "splash", "xla")
GROUPED_KERNELS = ("megablox", "ragged_dot")
#: Device kinds of the compile-only chips, for the kernels' own traffic models.
DEVICE_KINDS = {"v5e": "TPU v5 lite", "v6e": "TPU v6 lite"}
#: Experts of published models: (name, rows = tokens x experts per token, [K, N], experts).
MODELS = {
    "mixtral-8x7b": (8192 * 2, (4096, 14336), 8),
    "qwen3-30b-a3b": (8192 * 8, (2048, 768), 128),
}


@dataclasses.dataclass(frozen=True)
class Sweep:
    """What is compiled, and the compile budget (cells left when it is spent are said)."""

    chips: tuple[str, ...]
    lengths: tuple[int, ...]
    groups: tuple[int, ...]
    models: tuple[str, ...]
    rows_scale: float  # of each model's rows: quick runs compile smaller matmuls
    backward: bool
    budget_s: float


FULL = Sweep(("v5e", "v6e"), (8192, 32768), (1, 8), tuple(MODELS), 1.0, True, 1500.0)
QUICK = Sweep(("v5e",), (8192,), (1,), ("mixtral-8x7b",), 0.25, False, 300.0)


def _attention_cells(sweep: Sweep) -> list[dict[str, Any]]:
    return [
        {"chip": c, "seq_len": t, "group": g}
        for c in sweep.chips
        for t in sweep.lengths
        for g in sweep.groups
    ]


def _grouped_cells(sweep: Sweep) -> list[dict[str, Any]]:
    cells = []
    for chip in sweep.chips:
        for model in sweep.models:
            rows, dims, groups = MODELS[model]
            rows = int(rows * sweep.rows_scale)
            cells.append(
                {"chip": chip, "model": model, "rows": rows, "dims": list(dims), "groups": groups}
            )
    return cells


def _passes(sweep: Sweep) -> tuple[bool, ...]:
    return (False, True) if sweep.backward else (False,)


def _run_kernel(
    kind: str, kernel: str, cells: list[dict[str, Any]], sweep: Sweep, deadline: float
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Every cell of one kernel in one worker: its hello and one reply per (cell, pass)."""
    env = {"PYTHONPATH": str(ROOT)}
    worker = Worker("bench.tpu_kernels_worker", {"kind": kind, "kernel": kernel}, env=env,
                    python=str(TPU_PYTHON))  # fmt: skip
    replies = []
    try:
        hello = worker.hello
        for cell in cells:
            for backward in _passes(sweep):
                if time.perf_counter() > deadline:
                    reply = {"error": "skipped: the run's compile budget was spent"}
                else:
                    reply = worker.ask("compile", cell={**cell, "backward": backward})
                replies.append({**cell, "backward": backward, "reply": reply})
    except RuntimeError as err:  # the worker died: the cells it did not answer say so
        hello = {"error": str(err)}
    finally:
        worker.close()
    return hello, replies


def run(quick: bool) -> dict[str, Any]:
    """Both tables; "unavailable" with the reason without the TPU environment."""
    if why := tpu_environment_missing():
        return unavailable(NAME, TITLE, quick, why)
    sweep = QUICK if quick else FULL
    deadline = time.perf_counter() + sweep.budget_s
    kernels: dict[str, dict[str, Any]] = {}
    for kind, names, cells in (
        ("attention", ATTENTION_KERNELS, _attention_cells(sweep)),
        ("grouped", GROUPED_KERNELS, _grouped_cells(sweep)),
    ):
        for kernel in names:
            hello, replies = _run_kernel(kind, kernel, cells, sweep, deadline)
            kernels[kernel] = {"kind": kind, "hello": hello, "replies": replies}
    result = new_result(NAME, TITLE, quick)
    result["data"] = {"kernels": kernels, "models": _traffic_models(sweep)}
    return report(result)


def _traffic_models(sweep: Sweep) -> dict[str, Any]:
    """The Pallas attention kernels' own models of one forward's HBM traffic, per cell."""
    sys.path.insert(0, str(ROOT / "kernels" / "flash-tpu" / "bench"))
    import jax
    import jax.numpy as jnp

    import splash_traffic

    out: dict[str, Any] = {}
    for cell in _attention_cells(sweep):
        chip, t, g = cell["chip"], cell["seq_len"], cell["group"]
        key = f"{chip}/{t}/{g}"
        try:
            from zoo_flash_tpu import plan_call

            q = jax.ShapeDtypeStruct((2, t, 16, 128), jnp.bfloat16)
            kv = jax.ShapeDtypeStruct((2, t, 16 // g, 128), jnp.bfloat16)
            plan = plan_call(q, kv, device_kind=DEVICE_KINDS[chip], is_causal=True)
            out[f"flash_tpu/{key}"] = {"mib": plan.forward_bytes / MiB}
        except Exception as err:  # a model that cannot say leaves its cell empty, with why
            out[f"flash_tpu/{key}"] = {"error": str(err)[:120]}
        try:
            blocks = _splash_blocks(t)
            figures = splash_traffic.forward_figures(t, 16, g, blocks=blocks)
            out[f"splash/{key}"] = {"mib": figures["total_mib"]}
        except Exception as err:
            out[f"splash/{key}"] = {"error": str(err)[:120]}
    return out


def _splash_blocks(seq_len: int) -> Any:
    """The block sizes zoo's splash kernel chooses for the cell (``None``: splash's own,
    when zoo-splash is not installed)."""
    try:
        import zoo_splash
    except ImportError:
        return None
    return zoo_splash.choose_block_sizes(seq_len, seq_len)


def _figures(reply: dict[str, Any]) -> list[str]:
    """temporaries MiB, peak MiB, XLA bytes accessed MiB, GFLOP, compile s (or the error)."""
    if "error" in reply:
        return [f"error: {reply['error']}"[:90], "—", "—", "—", "—"]
    peak = reply["argument_bytes"] + reply["output_bytes"] - reply["alias_bytes"]
    peak += reply["temp_bytes"]
    return [
        f"{reply['temp_bytes'] / MiB:,.1f}",
        f"{peak / MiB:,.1f}",
        f"{reply['cost']['bytes'] / MiB:,.0f}",
        f"{reply['cost']['flops'] / 1e9:,.1f}",
        f"{reply['compile_s']:.1f}",
    ]


def _label(kernel: str, info: dict[str, Any]) -> str:
    version = info["hello"].get("version")
    return f"{kernel} {version}" if version else kernel


def _rows(data: dict[str, Any], kind: str) -> list[list[str]]:
    """One row per (cell, pass, kernel), kernels of a cell next to each other."""
    kernels = {k: v for k, v in data["kernels"].items() if v["kind"] == kind}
    cells: dict[tuple, list[list[str]]] = {}
    for kernel, info in kernels.items():
        for r in info["replies"]:
            passed = "fwd+bwd" if r["backward"] else "fwd"
            if kind == "attention":
                key = (r["chip"], r["seq_len"], r["group"], passed)
                where = [r["chip"], f"{r['seq_len']:,}", str(r["group"]), passed]
                model = data["models"].get(f"{kernel}/{r['chip']}/{r['seq_len']}/{r['group']}")
                modelled = (
                    "—"
                    if r["backward"] or model is None
                    else (f"{model['mib']:,.0f}" if "mib" in model else f"error: {model['error']}")
                )
            else:
                key = (r["chip"], r["model"], r["rows"], passed)
                where = [r["chip"], r["model"], f"{r['rows']:,}", passed]
                modelled = None
            row = [*where, _label(kernel, info), *_figures(r["reply"])]
            cells.setdefault(key, []).append(row if modelled is None else [*row, modelled])
    return [row for rows in cells.values() for row in rows]


def _failed(data: dict[str, Any], kind: str) -> list[str]:
    """A note for each kernel whose worker could not start or died."""
    return [
        f"{kernel}: {info['hello']['error']}"
        for kernel, info in data["kernels"].items()
        if info["kind"] == kind and "error" in info["hello"]
    ]


FIGURES = ["temp MiB", "peak MiB", "XLA bytes MiB", "GFLOP", "compile s"]
NOTES = [
    "Compiled by libtpu's compile-only devices from a CPU host (one device of a 2x2 topology), "
    "nothing ran on a TPU. temp MiB: the executable's memory_analysis() temporaries; peak "
    "MiB: temporaries + arguments + outputs (less aliased bytes); XLA bytes MiB and GFLOP: "
    "XLA's cost model of the compiled program (cost_analysis()), which takes a Pallas call's "
    "cost from the kernel's own estimate where it gives one; compile s: trace + lower + "
    "compile in a worker that has compiled once already.",
    "Every call goes through the contract's public entry point with implementation= the "
    "kernel, as a model calls it: layout changes and shard_map included. fwd+bwd is jax.vjp "
    "of the call with the cotangent as an input.",
]


def report(result: dict[str, Any]) -> dict[str, Any]:
    """The two tables, from the stored replies and models."""
    data = result["data"]
    attention = table(
        "Causal attention, B=2, N=16, K=N/G, H=128, bfloat16, per device",
        ["chip", "T", "G", "pass", "kernel", *FIGURES, "model fwd MiB"],
        _rows(data, "attention"),
        [
            *NOTES,
            "model fwd MiB: the kernel's own model of one forward's HBM traffic from its block "
            "sizes and grid (flash_tpu: zoo_flash_tpu.plan_call; splash: kernels/flash-tpu/"
            "bench/splash_traffic.py at the blocks zoo's splash kernel chooses); xla has none.",
            "JAX's splash gives pallas_call no cost estimate, so XLA's cost model counts only the "
            "layout changes around it: its XLA bytes and GFLOP are not the kernel's (its model "
            "fwd MiB is). Causal attention's FLOPs are 2·B·N·T²·H forward (half of the full "
            "4·B·N·T²·H, which xla computes and then masks).",
            *_failed(data, "attention"),
        ],
    )
    grouped = table(
        "Experts' grouped matmul (one projection [rows, K] x [G, K, N]), bfloat16, per device",
        ["chip", "model", "rows", "pass", "kernel", *FIGURES],
        _rows(data, "grouped"),
        [
            *NOTES,
            "rows: tokens x experts per token (8,192 tokens; quick runs a quarter), group sizes "
            "an input (the router's), so nothing is specialised to one routing.",
            *_failed(data, "grouped"),
        ],
    )
    result["tables"] = [attention, grouped]
    return result
