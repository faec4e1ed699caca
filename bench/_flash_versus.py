"""zoo_flash_tpu 0.1.1, 0.2.0, the installed version and JAX's splash attention on TPU v5e/v6e.

No TPU here, so two kinds of figure, each labelled: compile-time figures from libtpu's
compile-only devices (temporaries from the compiled executable's memory analysis, compile
seconds) and modelled figures (HBM bytes of one forward and the grid steps that do work, from
each kernel's own block sizes and index maps: ``zoo_flash_tpu._cost`` of each version, and
``_splash_traffic`` for splash). Each kernel compiles in one worker process in the TPU
environment (``_flash_versus_worker``): the installed (editable) version, labelled with its
distribution version; 0.1.1 and 0.2.0 each from its wheel unpacked on ``PYTHONPATH``
(``_release_site``); splash from the installed jax. On a real TPU the workers compile for the
local chip and also time each call.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import pathlib
import tempfile
import time
from typing import Any

from . import _flash_traffic, _splash_traffic
from ._release_site import (
    ROOT,
    ReleaseUnavailableError,
    install_target,
    installed_version,
    release_wheel,
)
from ._results import new_result, table, unavailable
from ._worker import Worker

NAME = "flash_versus"
INSTALLED = installed_version()  # the label of the installed version's column
#: Earlier releases compared, each from its wheel (one the installed version equals is left out).
RELEASES = ("0.1.1", "0.2.0")
PACKAGE = ("kernels/flash-tpu", "zoo-flash-tpu")
TITLE = (
    f"flash_tpu {' vs '.join(r for r in RELEASES if r != INSTALLED)} vs {INSTALLED} vs JAX "
    "splash attention on TPU v5e/v6e (compile-only, modelled)"
)
TPU_PYTHON = ROOT / ".venv-tpu" / "bin" / "python"
WORKER = "bench._flash_versus_worker"
MiB = 2**20
HEADS = 16  # N, as in the flash_traffic table
#: Device kinds flash_traffic's table models (its 0.1.x emulation is checked against them).
TRAFFIC_KINDS = {"TPU v5 lite", "TPU v5e", "TPU v6 lite", "TPU v6e"}
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
    expect_version: str | None = None
    source: str = ""  # where an older release's wheel came from ("" for the installed one)
    reason: str | None = None  # why the column is unavailable, if it is
    hello: dict[str, Any] = dataclasses.field(default_factory=dict)


def _columns(tmp: pathlib.Path, installed: str) -> list[Column]:
    """Each earlier release (its wheel unpacked under ``tmp``), the installed version, splash."""
    columns = []
    for version in RELEASES:
        if version == installed:
            continue
        old = Column(version, "zoo", [], expect_version=version)
        try:
            wheel, old.source = release_wheel(*PACKAGE, version, scratch=tmp / "wheels")
            target = tmp / f"zoo-flash-tpu-{version}"
            old.pythonpath = [str(install_target(wheel, target, TPU_PYTHON))]
        except ReleaseUnavailableError as err:
            old.reason = str(err)
        columns.append(old)
    current = Column(installed, "zoo", [], expect_version=installed)
    return [*columns, current, Column("splash", "splash", [])]


def traffic_key(version: str) -> str:
    """The flash_traffic figures a zoo version's grid matches: "0.1.x" (one query head per
    step) before 0.2.0, "0.2.0" (a GQA group's heads per step) from 0.2.0 on."""
    try:
        major_minor = tuple(int(x) for x in version.split(".")[:2])
    except ValueError:  # not a release number: the installed code, 0.2.0's grid or later
        return "0.2.0"
    return "0.1.x" if major_minor < (0, 2) else "0.2.0"


def _cells(sweep: Sweep, chips: tuple[str, ...]) -> list[tuple[str, int, int]]:
    return [(c, t, g) for c in chips for t in sweep.lengths for g in sweep.groups]


class _Budget:
    """Compile seconds left to the run."""

    def __init__(self, seconds: float):
        self.deadline = time.perf_counter() + seconds

    def spent(self) -> bool:
        return time.perf_counter() > self.deadline


def _run_column(
    column: Column, sweep: Sweep, chips: tuple[str, ...] | None, budget: _Budget
) -> tuple[dict[tuple, dict[str, Any]], tuple[str, ...]]:
    """Every cell of one kernel in one worker; returns the replies and the chips compiled for.

    ``chips`` is ``None`` until a worker has said whether it runs on a real TPU (then only
    its chip is compiled, and timed); it stays ``None`` if this worker could not say.
    """
    out: dict[tuple, dict[str, Any]] = {}
    env = {"PYTHONPATH": os.pathsep.join([*column.pythonpath, str(ROOT)])}
    config = {"kernel": column.kernel, "chips": list(chips or sweep.chips)}
    worker = Worker(WORKER, config, env=env, python=str(TPU_PYTHON))
    try:
        column.hello = worker.hello
        if column.expect_version and column.hello["version"] != column.expect_version:
            column.reason = f"the worker imported zoo_flash_tpu {column.hello['version']}"
            return out, chips
        if chips is None:
            kind = column.hello.get("device_kind")
            chips = (CHIP_NAMES.get(kind, kind),) if kind else sweep.chips
        passes = (False, True) if sweep.backward else (False,)
        for cell in _cells(sweep, chips):
            chip, t, g = cell
            reply: dict[str, Any] = {}
            if column.kernel == "zoo":
                reply["model"] = worker.ask("model", chip=chip, seq_len=t, group=g)
            for backward in passes:
                key = "fwd_bwd" if backward else "fwd"
                if budget.spent():
                    reply[key] = {"error": "skipped: the run's compile budget was spent"}
                    continue
                reply[key] = worker.ask("compile", chip=chip, seq_len=t, group=g, backward=backward)
            out[cell] = reply
    except RuntimeError as err:  # the worker died: the cells it did not answer say so
        column.reason = column.reason or str(err)
    finally:
        worker.close()
    return out, chips


@functools.cache
def _splash_model(seq_len: int, group: int, blocks: tuple[int, int] | None = None) -> dict:
    from jax.experimental.pallas.ops.tpu.splash_attention import BlockSizes

    sizes = BlockSizes(block_q=blocks[0], block_kv=blocks[1]) if blocks else None
    return _splash_traffic.forward_figures(seq_len, HEADS, group, blocks=sizes)


def _mib(n: int | None) -> str:
    return "—" if n is None else f"{n / MiB:,.1f}"


def _pass_cells(reply: dict[str, Any] | None, column: Column) -> tuple[str, str, str]:
    """(temporaries MiB, compile s, ms) of one pass, or the reason there are none."""
    if reply is None:
        return (f"unavailable: {column.reason}" if column.reason else "—"), "—", "—"
    if "error" in reply:
        return f"error: {reply['error']}", "—", "—"
    ms = f"{reply['ms']:.2f}" if "ms" in reply else "—"
    return _mib(reply["temp_bytes"]), f"{reply['compile_s']:.1f}", ms


def _model(column: Column, reply: dict[str, Any] | None, t: int, g: int) -> dict[str, Any]:
    if column.kernel == "splash":
        return _splash_model(t, g)
    return (reply or {}).get("model") or {}


def _row(cell: tuple, column: Column, reply: dict[str, Any] | None, timing: bool) -> list[str]:
    """One kernel's row of one cell; a pass not compiled (quick runs: fwd+bwd) shows "—"."""
    chip, t, g = cell
    model = _model(column, reply, t, g)
    fwd = _pass_cells((reply or {}).get("fwd"), column)
    both = _pass_cells((reply or {}).get("fwd_bwd"), column)
    have = "kv_mib" in model
    compute = f"/{model['kv_compute']}" if model.get("kv_compute") else ""
    plan = f"{model['blocks']}{compute}, {model['heads_per_step']} h/step" if have else "—"
    if "error" in model:
        plan = f"model error: {model['error']}"
    row = [
        chip, f"{t:,}", str(g), column.label, plan,
        fwd[0], both[0],
        f"{model['kv_mib']:,.0f}" if have else "—",
        f"{model['total_mib']:,.0f}" if have else "—",
        f"{model['steps']:,}" if have else "—",
        fwd[1], both[1],
    ]  # fmt: skip
    if timing:
        row += [fwd[2], both[2]]
    return row


def _agreement(data: list[dict[str, Any]], installed: str) -> str:
    """Whether each zoo worker's own model equals flash_traffic's (0.1.x emulated) one."""
    differ = []
    for d in data:
        if d["kernel"] == "splash" or "kv_mib" not in d["model"]:
            continue
        kind = d["model"]["device_kind"]
        if kind not in TRAFFIC_KINDS:
            continue
        ref = _flash_traffic.figures(kind, d["seq_len"], d["group"])[traffic_key(d["kernel"])]
        if any(ref[k] != d["model"][k] for k in ("kv_mib", "total_mib", "steps")):
            differ.append(f"{d['kernel']} {d['chip']} T={d['seq_len']} G={d['group']}")
    if differ:
        return "zoo's figures differ from the flash_traffic table's at " + ", ".join(differ) + "."
    return (
        "zoo's figures, from each version's own code in its worker, equal the flash_traffic "
        f"table's (computed with the installed {installed}'s cost model, which emulates 0.1.x's "
        "one query head per grid step)."
    )


def run(quick: bool) -> dict[str, Any]:
    """The side-by-side table; "unavailable" with the reason without the TPU environment."""
    if not TPU_PYTHON.exists():
        return unavailable(
            NAME, TITLE, quick, f"no TPU environment at {TPU_PYTHON} (run `make install`)"
        )
    sweep = QUICK if quick else FULL
    installed = installed_version()
    budget = _Budget(sweep.budget_s)
    replies: dict[str, dict[tuple, dict[str, Any]]] = {}
    chips: tuple[str, ...] | None = None
    with tempfile.TemporaryDirectory(prefix="zoo-flash-versus-") as tmp:
        columns = _columns(pathlib.Path(tmp), installed)
        for column in columns:
            if column.reason:
                replies[column.label] = {}
                continue
            replies[column.label], chips = _run_column(column, sweep, chips, budget)
    chips = chips or sweep.chips
    timing = any(c.hello.get("platform") == "tpu" for c in columns)
    result = new_result(NAME, TITLE, quick)
    rows, data = [], []
    for cell in _cells(sweep, chips):
        for column in columns:
            reply = replies[column.label].get(cell)
            rows.append(_row(cell, column, reply, timing))
            data.append(
                {
                    "chip": cell[0], "seq_len": cell[1], "group": cell[2],
                    "kernel": column.label, "version": column.hello.get("version"),
                    "model": _model(column, reply, cell[1], cell[2]),
                    "fwd": (reply or {}).get("fwd"), "fwd_bwd": (reply or {}).get("fwd_bwd"),
                    "unavailable": column.reason,
                }
            )  # fmt: skip
    zoo_blocks = _zoo_blocks(data, installed)
    result["data"] = {
        "mode": "timing" if timing else "compile-only",
        "installed": installed,
        "rows": data,
        "columns": {
            c.label: {"hello": c.hello, "wheel": c.source, "unavailable": c.reason} for c in columns
        },
        # Splash with the installed version's own blocks for the chip: what tuning its blocks
        # alone would give.
        "splash_with_zoo_blocks": [
            {"chip": chip, "seq_len": t, "group": g, **_splash_model(t, g, b)}
            for (chip, t, g), b in zoo_blocks.items()
        ],
    }
    result["tables"].append(_table(rows, columns, data, timing, installed))
    return result


def _zoo_blocks(data: list[dict[str, Any]], installed: str) -> dict[tuple, tuple[int, int]]:
    """The installed version's forward blocks per GQA cell (G > 1), as (block_q, block_kv)."""
    out = {}
    for d in data:
        blocks = d["model"].get("blocks") if d["kernel"] == installed else None
        if blocks and d["group"] > 1:
            bq, bk = (int(x) for x in blocks.split("x"))
            out[(d["chip"], d["seq_len"], d["group"])] = (bq, bk)
    return out


def _table(
    rows: list[list[str]],
    columns: list[Column],
    data: list[dict[str, Any]],
    timing: bool,
    installed: str,
) -> dict[str, Any]:
    splash = next(c for c in columns if c.kernel == "splash")
    wheels = "; ".join(
        f"{c.label}: {c.source or 'none'}" for c in columns if c.pythonpath or c.source
    )
    set_up = sorted(
        {(d["seq_len"], d["fwd"]["setup_s"]) for d in data
         if d["kernel"] == "splash" and d["fwd"] and "setup_s" in d["fwd"]}
    )  # fmt: skip
    first = {}
    for t, s in set_up:
        first[t] = max(first.get(t, 0.0), s)
    where = "timed on the local TPU" if timing else "libtpu compile-only, nothing ran on a TPU"
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
        "block sizes and index maps: one k and one v block per working grid step (a block "
        "index that repeats is not fetched again); q read and o written once per row of "
        "query blocks; zoo adds its float32 log-sum-exp row (zoo_flash_tpu._cost of each "
        "version, run in its worker); splash adds the (bq, 128) int32 query-position block its "
        "causal mask function reads per row and its scratch outputs (bench/_splash_traffic.py). "
        "Working steps: grid steps that compute; skipped blocks are not counted.",
        "zoo: zoo_flash_tpu.sharded_flash_attention(q, k, v, mesh, is_causal=True) on a 1x1 "
        "mesh, blocks from each version's policy for the chip (q×kv/c: key rows computed c at "
        "a time, compute sub-blocks of the loaded block; h/step: query heads per grid step). "
        f"{installed} is the installed (editable) package; each earlier release is its wheel "
        f"({wheels or 'none'}) unpacked with pip --target, first on PYTHONPATH of its own "
        "worker.",
        f"splash: jax {splash.hello.get('version', '?')} make_splash_mha (it takes K=N/G "
        "key/value heads and sends query head h to key/value head h // G; make_splash_mqa "
        "serves only K=1) with its default BlockSizes (128 everywhere, separate dq and dkv "
        "kernels), a MultiHeadMask of CausalMask, vmapped over the batch under shard_map, q "
        "scaled and transposed to [B, N, T, H] and back as a user does. Its mask "
        "preprocessing (make_splash_mha, once per T, not in compile s) took "
        + ", ".join(f"{s:.1f} s at T={t:,}" for t, s in sorted(first.items()))
        + ".",
        _agreement(data, installed),
    ]
    for c in columns:
        if c.reason:
            notes.append(f"{c.label} unavailable: {c.reason}")
    cols = ["chip", "T", "G", "kernel", "blocks (fwd q×kv/c)", "temp MiB fwd",
            "temp MiB fwd+bwd", "K/V MiB (model)", "total MiB (model)",
            "working steps (model)", "compile s fwd", "compile s fwd+bwd"]  # fmt: skip
    if timing:
        cols += ["ms fwd", "ms fwd+bwd"]
    title = "Per forward: compile-time figures (temp, compile s) and modelled traffic (model)"
    if timing:
        title = "Per forward on the local TPU: compiled and timed figures, modelled traffic (model)"
    return table(title, cols, rows, notes)
