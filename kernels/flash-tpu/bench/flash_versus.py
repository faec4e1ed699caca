"""zoo_flash_tpu 0.1.1, 0.2.0, the installed version and JAX's splash attention on TPU v5e/v6e.

No TPU here, so two kinds of figure, each labelled: compile-time figures from libtpu's
compile-only devices (temporaries from the compiled executable's memory analysis, compile
seconds) and modelled figures (HBM bytes of one forward and the grid steps that do work, from
each kernel's own block sizes and grid: ``zoo_flash_tpu.plan_call`` on each zoo version's
blocks and heads per step, :mod:`splash_traffic` for splash). Each kernel compiles in one
worker process in the TPU environment (:mod:`flash_versus_worker`): the installed (editable)
version, labelled with its distribution version; 0.1.1 and 0.2.0 each from its wheel unpacked
on ``PYTHONPATH`` (:mod:`flash_releases`); splash from the installed jax. On a real TPU the
workers compile for the local chip and also time each call.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import pathlib
import tempfile
import time
from typing import Any

import splash_traffic
from bench.harness import (
    ROOT,
    TPU_PYTHON,
    Worker,
    new_result,
    table,
    tpu_environment_missing,
    unavailable,
)
from flash_releases import ReleaseUnavailableError, install_target, installed_version, release_wheel

NAME = "flash_versus"
INSTALLED = installed_version()  # the label of the installed version's column
#: Earlier releases compared, each from its wheel (one the installed version equals is left out).
RELEASES = ("0.1.1", "0.2.0")
PACKAGE = ("kernels/flash-tpu", "zoo-flash-tpu")
TITLE = (
    f"flash_tpu {' vs '.join(r for r in RELEASES if r != INSTALLED)} vs {INSTALLED} vs JAX "
    "splash attention on TPU v5e/v6e (compile-only, modelled)"
)
HERE = pathlib.Path(__file__).resolve().parent
MiB = 2**20
HEADS, HEAD_DIM = 16, 128  # N and H, as in the flash_traffic table
#: Device kinds a TPU reports, by the chip names used here (timing mode on a real TPU).
CHIP_NAMES = {"TPU v5 lite": "v5e", "TPU v5e": "v5e", "TPU v6 lite": "v6e", "TPU v6e": "v6e"}


@dataclasses.dataclass(frozen=True)
class Sweep:
    """What is compiled: chips, sequence lengths, GQA groups; forward+backward too or not."""

    chips: tuple[str, ...]
    lengths: tuple[int, ...]
    groups: tuple[int, ...]
    backward: bool
    budget_s: float  # compile time per run; cells left when it is spent are skipped and said


FULL = Sweep(("v5e", "v6e"), (8192, 32768), (1, 4, 8), True, 900.0)
QUICK = Sweep(("v5e",), (8192,), (1, 4), False, 300.0)


@dataclasses.dataclass
class Column:
    """One kernel of the table and the worker that compiles it."""

    label: str  # a zoo_flash_tpu version ("0.1.1", the installed one's) or "splash"
    kernel: str  # the worker's kernel: "zoo" or "splash"
    pythonpath: list[str]
    source: str = ""  # where an older release's wheel came from ("" for the installed one)
    reason: str | None = None  # why the column is unavailable, if it is
    hello: dict[str, Any] = dataclasses.field(default_factory=dict)


def _columns(tmp: pathlib.Path, installed: str) -> list[Column]:
    """Each earlier release (its wheel unpacked under ``tmp``), the installed version, splash."""
    columns = []
    for version in RELEASES:
        if version == installed:
            continue
        old = Column(version, "zoo", [])
        try:
            wheel, old.source = release_wheel(*PACKAGE, version, scratch=tmp / "wheels")
            target = tmp / f"zoo-flash-tpu-{version}"
            old.pythonpath = [str(install_target(wheel, target, TPU_PYTHON))]
        except ReleaseUnavailableError as err:
            old.reason = str(err)
        columns.append(old)
    return [*columns, Column(installed, "zoo", []), Column("splash", "splash", [])]


def heads_per_step(version: str, group: int) -> int:
    """Query heads per grid step of a zoo version: one before 0.2.0; from 0.2.0 on a GQA
    group's (up to 8, the installed policy's rule, unchanged since 0.2.0)."""
    try:
        grouped = tuple(int(x) for x in version.split(".")[:2]) >= (0, 2)
    except ValueError:  # not a release number: the installed code
        grouped = True
    return _plan(8192, group, "TPU v5 lite", None, None).heads_per_step if grouped else 1


@functools.cache
def _plan(t: int, group: int, kind: str, blocks: tuple[int, ...] | None, heads: int | None) -> Any:
    """The installed version's ``plan_call`` of one causal forward of the table's shapes."""
    import jax
    import jax.numpy as jnp

    from zoo_flash_tpu import BlockSizes, plan_call

    q = jax.ShapeDtypeStruct((2, t, HEADS, HEAD_DIM), jnp.bfloat16)
    kv = jax.ShapeDtypeStruct((2, t, HEADS // group, HEAD_DIM), jnp.bfloat16)
    sizes = BlockSizes(*blocks) if blocks else None
    return plan_call(
        q, kv, device_kind=kind, is_causal=True, block_sizes=sizes, heads_per_step=heads
    )


def zoo_model(plan: dict[str, Any], t: int, group: int, heads: int) -> dict[str, Any]:
    """Modelled forward traffic of a zoo version's own blocks (``plan``, from its worker) and
    grid (``heads`` query heads per step)."""
    p = _plan(t, group, plan["device_kind"], tuple(plan["blocks"]), heads)
    bq, bk = plan["blocks"][:2]
    return {"device_kind": plan["device_kind"], "blocks": f"{bq}x{bk}", "heads_per_step": heads,
            "kv_compute": plan["kv_compute"], "kv_mib": p.forward_kv_bytes / MiB,
            "total_mib": p.forward_bytes / MiB, "steps": p.forward_steps}  # fmt: skip


@functools.cache
def splash_model(seq_len: int, group: int) -> dict[str, Any]:
    """Splash's modelled forward at its default blocks (:mod:`splash_traffic`)."""
    return splash_traffic.forward_figures(seq_len, HEADS, group)


def _run_column(
    column: Column, sweep: Sweep, chips: tuple[str, ...] | None, deadline: float
) -> tuple[dict[tuple, dict[str, Any]], tuple[str, ...] | None]:
    """Every cell of one kernel in one worker; returns the replies and the chips compiled for.

    ``chips`` is ``None`` until a worker has said whether it runs on a real TPU (then only
    its chip is compiled, and timed); it stays ``None`` if this worker could not say.
    """
    out: dict[tuple, dict[str, Any]] = {}
    env = {"PYTHONPATH": os.pathsep.join([*column.pythonpath, str(ROOT), str(HERE)])}
    config = {"kernel": column.kernel, "chips": list(chips or sweep.chips)}
    worker = Worker("flash_versus_worker", config, env=env, python=str(TPU_PYTHON))
    try:
        column.hello = worker.hello
        if column.kernel == "zoo" and column.hello["version"] != column.label:
            column.reason = f"the worker imported zoo_flash_tpu {column.hello['version']}"
            return out, chips
        if chips is None:
            kind = column.hello.get("device_kind")
            chips = (CHIP_NAMES.get(kind, kind),) if kind else sweep.chips
        for cell in _cells(sweep, chips):
            chip, t, g = cell
            reply: dict[str, Any] = {}
            if column.kernel == "zoo":
                heads = heads_per_step(column.label, g)
                plan = worker.ask("plan", chip=chip, seq_len=t, heads=heads)
                reply["model"] = plan if "error" in plan else zoo_model(plan, t, g, heads)
            for key, backward in (("fwd", False), ("fwd_bwd", True))[: 1 + sweep.backward]:
                if time.perf_counter() > deadline:
                    reply[key] = {"error": "skipped: the run's compile budget was spent"}
                    continue
                reply[key] = worker.ask("compile", chip=chip, seq_len=t, group=g, backward=backward)
            out[cell] = reply
    except RuntimeError as err:  # the worker died: the cells it did not answer say so
        column.reason = column.reason or str(err)
    finally:
        worker.close()
    return out, chips


def _cells(sweep: Sweep, chips: tuple[str, ...]) -> list[tuple[str, int, int]]:
    return [(c, t, g) for c in chips for t in sweep.lengths for g in sweep.groups]


def run(quick: bool) -> dict[str, Any]:
    """The side-by-side table; "unavailable" with the reason without the TPU environment."""
    if why := tpu_environment_missing():
        return unavailable(NAME, TITLE, quick, why)
    sweep = QUICK if quick else FULL
    installed = installed_version()
    deadline = time.perf_counter() + sweep.budget_s
    replies: dict[str, dict[tuple, dict[str, Any]]] = {}
    chips: tuple[str, ...] | None = None
    with tempfile.TemporaryDirectory(prefix="zoo-flash-versus-") as tmp:
        columns = _columns(pathlib.Path(tmp), installed)
        for column in columns:
            replies[column.label] = {}
            if not column.reason:
                replies[column.label], chips = _run_column(column, sweep, chips, deadline)
    rows = []
    for chip, t, g in _cells(sweep, chips or sweep.chips):
        for column in columns:
            reply = replies[column.label].get((chip, t, g)) or {}
            model = splash_model(t, g) if column.kernel == "splash" else reply.get("model") or {}
            rows.append({"chip": chip, "seq_len": t, "group": g, "kernel": column.label,
                         "version": column.hello.get("version"), "model": model,
                         "fwd": reply.get("fwd"), "fwd_bwd": reply.get("fwd_bwd"),
                         "unavailable": column.reason})  # fmt: skip
    result = new_result(NAME, TITLE, quick)
    timing = any(c.hello.get("platform") == "tpu" for c in columns)
    result["data"] = {
        "mode": "timing" if timing else "compile-only",
        "installed": installed,
        "rows": rows,
        "columns": {
            c.label: {"hello": c.hello, "wheel": c.source, "unavailable": c.reason} for c in columns
        },
    }
    return report(result)


def _pass_cells(reply: dict[str, Any] | None, reason: str | None) -> tuple[str, str, str]:
    """(temporaries MiB, compile s, ms) of one pass, or the reason there are none."""
    if reply is None:
        return (f"unavailable: {reason}" if reason else "—"), "—", "—"
    if "error" in reply:
        return f"error: {reply['error']}", "—", "—"
    ms = f"{reply['ms']:.2f}" if "ms" in reply else "—"
    return f"{reply['temp_bytes'] / MiB:,.1f}", f"{reply['compile_s']:.1f}", ms


def _row(d: dict[str, Any], timing: bool) -> list[str]:
    """One kernel's row of one cell; a pass not compiled (quick runs: fwd+bwd) shows "—"."""
    model = d["model"] or {}
    fwd, both = (_pass_cells(d[key], d["unavailable"]) for key in ("fwd", "fwd_bwd"))
    have = "kv_mib" in model
    compute = f"/{model['kv_compute']}" if model.get("kv_compute") else ""
    plan = f"{model['blocks']}{compute}, {model['heads_per_step']} h/step" if have else "—"
    if "error" in model:
        plan = f"model error: {model['error']}"
    modelled = [f"{model[k]:,.0f}" if have else "—" for k in ("kv_mib", "total_mib", "steps")]
    row = [d["chip"], f"{d['seq_len']:,}", str(d["group"]), d["kernel"], plan, fwd[0], both[0],
           *modelled, fwd[1], both[1]]  # fmt: skip
    return [*row, fwd[2], both[2]] if timing else row


def report(result: dict[str, Any]) -> dict[str, Any]:
    """The table, from the stored replies and models."""
    data = result["data"]
    timing, installed, columns = data["mode"] == "timing", data["installed"], data["columns"]
    wheels = "; ".join(f"{k}: {c['wheel']}" for k, c in columns.items() if c["wheel"])
    setup: dict[int, float] = {}
    for d in data["rows"]:
        if d["kernel"] == "splash" and d["fwd"] and "setup_s" in d["fwd"]:
            setup[d["seq_len"]] = max(setup.get(d["seq_len"], 0.0), d["fwd"]["setup_s"])
    where = "timed on the local TPU" if timing else "libtpu compile-only, nothing ran on a TPU"
    splash_jax = columns.get("splash", {}).get("hello", {}).get("version", "?")
    notes = [
        "Shapes: B=2, N=16 query heads, K=N/G key/value heads, H=128, causal, bfloat16, inputs "
        "[B, T, N, H] on one device.",
        f"Compile-time figures ({where}): temp MiB is the compiled executable's "
        "memory_analysis().temp_size_in_bytes, layout copies around the kernels included "
        "(temporaries XLA keeps in VMEM, memory space S(1) in the compiled HLO, are not, so a "
        "small copy may not show); compile s is trace + lower + compile in a worker that has "
        "already compiled once; fwd+bwd is jax.vjp of the call with the cotangent as an input.",
        "Modelled figures (not measured): HBM bytes of one forward call of the kernel itself "
        "(layout copies outside it are in the temporaries, not here), from each kernel's "
        "block sizes and grid: one k and one v block per working grid step (a block index that "
        "repeats is not fetched again); q read and o written once per row of query blocks; zoo "
        "adds its float32 log-sum-exp row (the installed zoo_flash_tpu.plan_call on each "
        "version's own blocks, from its policy in its worker, and its heads per step: one "
        "before 0.2.0); splash adds the (bq, 128) int32 query-position block its causal mask "
        "function reads per row and its scratch outputs (kernels/flash-tpu/bench/"
        "splash_traffic.py). Working steps: grid steps that compute; skipped blocks are not "
        "counted.",
        "zoo: zoo_flash_tpu.sharded_flash_attention(q, k, v, mesh, is_causal=True) on a 1x1 "
        "mesh, blocks from each version's policy for the chip (q×kv/c: key rows computed c at "
        "a time, compute sub-blocks of the loaded block; h/step: query heads per grid step). "
        f"{installed} is the installed (editable) package; each earlier release is its wheel "
        f"({wheels or 'none'}) unpacked with pip --target, first on PYTHONPATH of its own "
        "worker.",
        f"splash: jax {splash_jax} make_splash_mha (it takes K=N/G key/value heads and sends "
        "query head h to key/value head h // G; make_splash_mqa serves only K=1) with its "
        "default BlockSizes (128 everywhere, separate dq and dkv kernels), a MultiHeadMask of "
        "CausalMask, vmapped over the batch under shard_map, q scaled and transposed to "
        "[B, N, T, H] and back as a user does. Its mask preprocessing (make_splash_mha, once "
        "per T, not in compile s) took "
        + ", ".join(f"{s:.1f} s at T={t:,}" for t, s in sorted(setup.items()))
        + ".",
    ]
    notes += [
        f"{k} unavailable: {c['unavailable']}" for k, c in columns.items() if c["unavailable"]
    ]
    cols = ["chip", "T", "G", "kernel", "blocks (fwd q×kv/c)", "temp MiB fwd",
            "temp MiB fwd+bwd", "K/V MiB (model)", "total MiB (model)",
            "working steps (model)", "compile s fwd", "compile s fwd+bwd"]  # fmt: skip
    title = "Per forward: compile-time figures (temp, compile s) and modelled traffic (model)"
    if timing:
        cols += ["ms fwd", "ms fwd+bwd"]
        title = "Per forward on the local TPU: compiled and timed figures, modelled traffic (model)"
    result["tables"] = [table(title, cols, [_row(d, timing) for d in data["rows"]], notes)]
    return result
