"""PNG plots of the results (matplotlib, Agg backend), written next to the JSON."""

from __future__ import annotations

import pathlib
from collections.abc import Callable
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from ._stats import median


def _save(fig: Any, path: pathlib.Path) -> str:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path.name


def plot_training(result: dict[str, Any], directory: pathlib.Path) -> list[str]:
    """Tokens/s of both sides per config, with every timed step as a dot."""
    cases = list(result["data"].items())
    fig, axes = plt.subplots(1, len(cases), figsize=(4.2 * len(cases), 3.6), squeeze=False)
    for ax, (name, entry) in zip(axes[0], cases, strict=True):
        raw, summary = entry["raw"], entry["summary"]
        tokens = summary["tokens_per_step"]
        for i, side in enumerate(("zoo", "hf")):
            per_step = [tokens / t for t in raw["times_s"][side]]
            ax.bar(i, summary[side]["tokens_per_s"], color=("C0", "C1")[i], alpha=0.7)
            ax.plot([i] * len(per_step), per_step, "k.", ms=4)
        ax.set_xticks([0, 1], ["zoo (jax)", "transformers (torch)"])
        ax.set_ylabel("tokens / s")
        ax.set_title(f"{name}\nzoo/HF = {summary['ratio']:.2f}×", fontsize=9)
    return [_save(fig, directory / "training.png")]


def plot_attention(result: dict[str, Any], directory: pathlib.Path) -> list[str]:
    """Time, peak RSS and XLA's compiled temporaries against T, per kernel and pass (log-log)."""
    runs = result["data"]["runs"]
    cap = result["data"]["cap_bytes"]
    fig, (ax_t, ax_m, ax_x) = plt.subplots(1, 3, figsize=(14, 4))
    for impl, color in (("xla", "C1"), ("chunked", "C0")):
        for phase, style in (("forward", "--"), ("forward_backward", "-")):
            label = f"{impl} {'fwd' if phase == 'forward' else 'fwd+bwd'}"
            mine = [r for r in runs if r["config"]["implementation"] == impl]
            ok = [r for r in mine if r[phase]["status"] == "ok"]
            if ok:
                ts = [r["config"]["seq_len"] for r in ok]
                ax_t.plot(
                    ts,
                    [median(r[phase]["times_s"]) for r in ok],
                    style,
                    color=color,
                    marker="o",
                    label=label,
                )
                ax_m.plot(
                    ts,
                    [r[phase]["peak_rss_bytes"] / 2**30 for r in ok],
                    style,
                    color=color,
                    marker="o",
                    label=label,
                )
            known = [r for r in mine if (r[phase].get("xla_memory") or {}).get("temp")]
            if known:
                ax_x.plot(
                    [r["config"]["seq_len"] for r in known],
                    [r[phase]["xla_memory"]["temp"] / 2**30 for r in known],
                    style,
                    color=color,
                    marker="o",
                    label=label,
                )
            for r in mine:
                if r[phase]["status"] == "oom":
                    need = sum(v for v in (r[phase].get("xla_memory") or {}).values() if v)
                    if need:
                        ax_m.plot([r["config"]["seq_len"]], [need / 2**30], "x", color=color, ms=9)
    for ax in (ax_m, ax_x):
        ax.axhline(cap / 2**30, color="gray", lw=0.8, ls=":", label="memory cap")
    titles = (
        (ax_t, "seconds", "attention time (causal, float32)"),
        (ax_m, "GiB (x: XLA's need, over the cap: not run)", "peak RSS of the measuring process"),
        (ax_x, "GiB", "XLA temporaries (memory_analysis)"),
    )
    for ax, ylabel, title in titles:
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("sequence length T")
        ax.set_ylabel(ylabel)
        ax.set_title(title, fontsize=9)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    return [_save(fig, directory / "attention.png")]


def plot_compile(result: dict[str, Any], directory: pathlib.Path) -> list[str]:
    """Compile time against depth, scan and unrolled."""
    data = result["data"]["depths"]
    fig, ax = plt.subplots(figsize=(5, 3.6))
    for kind, color in (("scan", "C0"), ("unrolled", "C1")):
        pts = [
            (d["n_layers"], d[kind]["lower_s"] + d[kind]["compile_s"]) for d in data if kind in d
        ]
        if pts:
            ax.plot(
                *zip(*pts, strict=True),
                marker="o",
                color=color,
                label=f"{kind} (trace+lower+compile)",
            )
    ax.set_xscale("log", base=2)
    ax.set_xlabel("layers")
    ax.set_ylabel("seconds")
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title("train step compile time vs depth", fontsize=9)
    return [_save(fig, directory / "compile.png")]


def plot_checkpoint(result: dict[str, Any], directory: pathlib.Path) -> list[str]:
    """Save and restore GiB/s per method."""
    summary = result["data"]["summary"]
    methods = list(summary)
    fig, ax = plt.subplots(figsize=(7, 3.6))
    xs = range(len(methods))
    ax.bar(
        [x - 0.2 for x in xs], [summary[m]["save_gib_per_s"] for m in methods], 0.4, label="save"
    )
    ax.bar(
        [x + 0.2 for x in xs],
        [summary[m]["restore_gib_per_s"] for m in methods],
        0.4,
        label="restore",
    )
    ax.set_xticks(list(xs), [m.replace(" ", "\n", 1) for m in methods], fontsize=7)
    ax.set_ylabel("GiB / s")
    ax.legend(fontsize=8)
    ax.set_title(
        f"checkpoint I/O ({result['data']['state']}, {result['data']['bytes'] / 2**30:.2f} GiB)",
        fontsize=9,
    )
    return [_save(fig, directory / "checkpoint.png")]


PLOTTERS: dict[str, Callable[[dict[str, Any], pathlib.Path], list[str]]] = {
    "training": plot_training,
    "attention": plot_attention,
    "compile": plot_compile,
    "checkpoint": plot_checkpoint,
}


def plot(result: dict[str, Any], directory: pathlib.Path) -> list[str]:
    """The PNGs for ``result`` (file names in ``directory``); none for unavailable results."""
    plotter = PLOTTERS.get(result["name"])
    if plotter is None or result["status"] != "ok":
        return []
    directory.mkdir(parents=True, exist_ok=True)
    return plotter(result, directory)
