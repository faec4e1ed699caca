"""Attention on CPU: forward and forward+backward time and peak memory against T, per kernel:
softmax attention (``xla``, ``chunked``) and the gated delta rule of gated DeltaNet layers
(``linear:chunked_xla``, the chunkwise kernel every platform falls back to, and
``linear:recurrent``, the token-by-token definition it is checked against).

Every (kernel, T) runs in a fresh process (:mod:`bench.attention_worker`) under a memory cap,
so the peak RSS is that measurement's alone and an out-of-memory is a clean row, not a crash.
"""

from __future__ import annotations

import json
import math
import pathlib
import subprocess
import sys
import time
from typing import Any

from .harness import figure, fmt, gib, median, memory_cap, new_result, save_figure, table, target

NAME = "attention"
TITLE = (
    "Attention on CPU: softmax (xla, chunked) and linear (the gated delta rule), forward and "
    "forward+backward against sequence length"
)
IMPLEMENTATIONS = ("chunked", "xla", "linear:chunked_xla", "linear:recurrent")
SHAPE = {"batch": 1, "heads": 4, "head_dim": 64}
TARGET_T = 32768
TARGET_BYTES = 24 * 2**30
TIME_BUDGET_S = {True: 240.0, False: 1500.0}
#: One (kernel, T) measurement at most; the longest, the recurrence at 32k, takes about 2 min.
WORKER_TIMEOUT_S = 900.0


def lengths(quick: bool) -> list[int]:
    """Sequence lengths swept."""
    return [512, 1024, 2048] if quick else [1024, 2048, 4096, 8192, 16384, 32768]


def _repeats(seq_len: int) -> int:
    return 3 if seq_len <= 2048 else 2 if seq_len <= 4096 else 1


def measure(implementation: str, seq_len: int, cap: int, execute: bool = True) -> dict[str, Any]:
    """One worker run; its JSON, or a row saying how it failed.

    ``execute=False`` only compiles and checks the memory (cheap): an over-the-cap function is
    still reported as out of memory, one that fits as skipped.
    """
    config = {"implementation": implementation, "seq_len": seq_len, **SHAPE}
    config.update(repeats=_repeats(seq_len), cap_bytes=cap, execute=execute)
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "bench.attention_worker", json.dumps(config)],
            capture_output=True,
            text=True,
            timeout=WORKER_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        # Under the address-space cap a failed allocation in one of XLA's threads can leave the
        # process waiting forever: a row that says so, not a sweep that never ends.
        hung = {"status": "error", "reason": f"no result in {WORKER_TIMEOUT_S:.0f} s"}
        return {"config": config, "forward": hung, "forward_backward": hung}
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode == 0 and lines:
        return json.loads(lines[-1])
    tail = (proc.stderr.strip().splitlines() or [""])[-1][:200]
    oom = (
        proc.returncode in (-6, -9)
        or "memory" in proc.stderr.lower()
        or "alloc" in proc.stderr.lower()
    )
    status = "oom" if oom else "error"
    failed = {"status": status, "reason": f"process exited with {proc.returncode}: {tail}"}
    return {"config": config, "forward": failed, "forward_backward": failed}


def _phase_cells(phase: dict[str, Any]) -> list[str]:
    temp = (phase.get("xla_memory") or {}).get("temp")
    temp_cell = fmt(gib(temp), 3) if temp is not None else "—"
    if phase["status"] != "ok":
        label = {"oom": "out of memory", "skipped": "not run (time)"}.get(phase["status"], "error")
        return [label, "—", temp_cell]
    rss = phase["peak_rss_bytes"]
    return [f"{1000 * median(phase['times_s']):.0f}", fmt(gib(rss), 3), temp_cell]


def _exponent(small: float | None, large: float | None, ratio: float) -> float | None:
    if not small or not large or small <= 0 or large <= 0:
        return None
    return math.log(large / small) / math.log(ratio)


def run(quick: bool) -> dict[str, Any]:
    """The sweep; a result dict (see :mod:`bench.harness`)."""
    cap = memory_cap(quick)
    start = time.perf_counter()
    runs = []
    for impl in IMPLEMENTATIONS:
        for seq_len in lengths(quick):
            # Past the budget, still compile: whether it fits is cheap to know and is the point.
            execute = time.perf_counter() - start <= TIME_BUDGET_S[quick]
            runs.append(measure(impl, seq_len, cap, execute))
    result = new_result(NAME, TITLE, quick)
    result["data"] = {"runs": runs, "cap_bytes": cap, "shape": SHAPE}
    return report(result)


def report(result: dict[str, Any]) -> dict[str, Any]:
    """The table and the target, from the stored runs."""
    runs, cap = result["data"]["runs"], result["data"]["cap_bytes"]
    rows = [
        [r["config"]["implementation"], str(r["config"]["seq_len"]),
         *_phase_cells(r["forward"]), *_phase_cells(r["forward_backward"])]
        for r in runs
    ]  # fmt: skip
    result["notes"] = []
    result["tables"] = [
        table(
            f"Attention, causal, float32, B={SHAPE['batch']}, heads={SHAPE['heads']}, "
            f"head_dim={SHAPE['head_dim']} (cap {cap / 2**30:.1f} GiB)",
            [
                "kernel",
                "T",
                "fwd ms",
                "fwd peak RSS GiB",
                "fwd XLA temp GiB",
                "fwd+bwd ms",
                "fwd+bwd peak RSS GiB",
                "fwd+bwd XLA temp GiB",
            ],
            rows,
            [
                "Peak RSS: the measuring process's maximum resident set (includes ~0.3 GiB of "
                "runtime and the inputs). XLA temp: `compiled.memory_analysis().temp_size_in_bytes`.",
                "Out of memory: XLA's compiled memory (arguments + outputs + temporaries) exceeds "
                "the cap, or an allocation failed under it; such rows are not run.",
            ],
        )
    ]
    result["targets"] = _targets(runs, result["quick"])
    return result


def _targets(runs: list[dict[str, Any]], quick: bool) -> list[dict[str, Any]]:
    return [
        _linear_memory_target(runs, quick, "chunked"),
        _linear_memory_target(runs, quick, "linear:chunked_xla"),
        _faster_target(runs, quick, "linear:chunked_xla", "linear:recurrent"),
    ]


def _by_length(runs: list[dict[str, Any]], implementation: str) -> dict[int, dict[str, Any]]:
    return {
        r["config"]["seq_len"]: r for r in runs if r["config"]["implementation"] == implementation
    }


def _linear_memory_target(
    runs: list[dict[str, Any]], quick: bool, implementation: str
) -> dict[str, Any]:
    """``implementation``'s forward+backward at :data:`TARGET_T` within 24 GiB, with XLA's
    temporaries growing at most linearly from the length before it."""
    mine = _by_length(runs, implementation)
    big = mine.get(TARGET_T)
    text = f"{implementation} forward+backward at T={TARGET_T} within 24 GiB, memory linear in T"
    if big is None or big["forward_backward"]["status"] != "ok":
        why = (
            "not run in --quick"
            if quick
            else (big or {}).get("forward_backward", {}).get("status", "not run")
        )
        return target(text, why, None)
    ts = sorted(t for t, r in mine.items() if r["forward_backward"]["status"] == "ok")
    prev = mine[ts[-2]]["forward_backward"] if len(ts) > 1 else None
    fb = big["forward_backward"]
    ratio = ts[-1] / ts[-2] if len(ts) > 1 else 2.0
    temp_exp = _exponent(
        (prev or {}).get("xla_memory", {}).get("temp"), fb["xla_memory"].get("temp"), ratio
    )
    base = big.get("baseline_rss_bytes") or 0
    rss_exp = _exponent(
        (prev or {}).get("peak_rss_bytes", 0) - (mine[ts[-2]].get("baseline_rss_bytes") or 0),
        fb["peak_rss_bytes"] - base,
        ratio,
    )
    fits = fb["peak_rss_bytes"] <= TARGET_BYTES
    linear = temp_exp is not None and temp_exp <= 1.25
    measured = (
        f"peak RSS {gib(fb['peak_rss_bytes']):.2f} GiB; growth exponent {ts[-2]}→{ts[-1]}: "
        f"XLA temp {fmt(temp_exp)}, RSS above baseline {fmt(rss_exp)}"
    )
    return target(text, measured, fits and linear)


def _faster_target(
    runs: list[dict[str, Any]], quick: bool, kernel: str, reference: str
) -> dict[str, Any]:
    """``kernel``'s forward+backward faster than ``reference``'s at the longest length both
    ran."""
    mine, theirs = _by_length(runs, kernel), _by_length(runs, reference)
    both = [
        t
        for t in mine
        if t in theirs
        and mine[t]["forward_backward"]["status"] == theirs[t]["forward_backward"]["status"] == "ok"
    ]
    text = f"{kernel} forward+backward faster than {reference} (the token-by-token definition)"
    if not both:
        return target(text, "not run", None)
    t = max(both)
    ours = median(mine[t]["forward_backward"]["times_s"])
    ref = median(theirs[t]["forward_backward"]["times_s"])
    return target(
        text, f"at T={t}: {ours:.2f} s against {ref:.2f} s ({ref / ours:.1f}x)", ours < ref
    )


def plot(result: dict[str, Any], directory: pathlib.Path) -> list[str]:
    """Time, peak RSS and XLA's compiled temporaries against T, per kernel and pass (log-log);
    an x marks what XLA would need where it is over the cap (not run)."""
    runs, cap = result["data"]["runs"], result["data"]["cap_bytes"] / 2**30
    fig, (ax_t, ax_m, ax_x) = figure(1, 3, figsize=(14, 4))
    colors = (
        ("xla", "C1"),
        ("chunked", "C0"),
        ("linear:chunked_xla", "C2"),
        ("linear:recurrent", "C3"),
    )
    for impl, color in colors:
        mine = [r for r in runs if r["config"]["implementation"] == impl]
        for phase, style in (("forward", "--"), ("forward_backward", "-")):
            line = {"color": color, "marker": "o", "label": f"{impl} {'fwd' if phase == 'forward' else 'fwd+bwd'}"}  # fmt: skip
            ok = [r for r in mine if r[phase]["status"] == "ok"]
            ts = [r["config"]["seq_len"] for r in ok]
            if ok:
                ax_t.plot(ts, [median(r[phase]["times_s"]) for r in ok], style, **line)
                ax_m.plot(ts, [r[phase]["peak_rss_bytes"] / 2**30 for r in ok], style, **line)
            known = [r for r in mine if (r[phase].get("xla_memory") or {}).get("temp")]
            if known:
                ax_x.plot([r["config"]["seq_len"] for r in known],
                          [r[phase]["xla_memory"]["temp"] / 2**30 for r in known], style, **line)  # fmt: skip
            for r in mine:
                need = sum(v for v in (r[phase].get("xla_memory") or {}).values() if v)
                if r[phase]["status"] == "oom" and need:
                    ax_m.plot([r["config"]["seq_len"]], [need / 2**30], "x", color=color, ms=9)
    for ax, ylabel, title in (
        (ax_t, "seconds", "attention time (causal, float32)"),
        (ax_m, "GiB (x: XLA's need, over the cap: not run)", "peak RSS of the measuring process"),
        (ax_x, "GiB", "XLA temporaries (memory_analysis)"),
    ):
        if ax is not ax_t:
            ax.axhline(cap, color="gray", lw=0.8, ls=":", label="memory cap")
        ax.set_xscale("log", base=2)
        ax.set(yscale="log", xlabel="sequence length T", ylabel=ylabel)
        ax.set_title(title, fontsize=9)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    return [save_figure(fig, directory / "attention.png")]
