"""Training throughput: zoo against Hugging Face ``transformers`` (PyTorch eager), interleaved.

Each side runs in its own long-lived worker process (:mod:`bench.training_worker`), compiled and
warmed up before timing; the parent then alternates A B A B, collects every step's wall time
and reports medians, the tokens/s ratio and the model-FLOPs utilisation against the float32
matmul peak measured by both workers before and after the timed rounds. Each worker also times
matmuls at the model's GEMM shapes and one attention forward+backward, which split a step into
matmuls, attention and the rest.
"""

from __future__ import annotations

import dataclasses
import pathlib
import time
from typing import Any

from .harness import (
    FORMULA,
    Worker,
    figure,
    flops_per_token,
    fmt,
    gemm_shapes,
    gpt2_matmul_params,
    median,
    new_result,
    save_figure,
    table,
    target,
)
from .training_zoo import ATTENTION as ZOO_ATTENTION

NAME = "training"
TITLE = "Training throughput: zoo vs Hugging Face transformers (CPU, float32, AdamW)"
THREADS = 2
HPARAMS = {"lr": 3e-4, "b1": 0.9, "b2": 0.95, "eps": 1e-8, "weight_decay": 0.1}
RATIO_TARGET = 1.5
MFU_TARGET = 0.75
SIDES = ("zoo", "hf")


@dataclasses.dataclass(frozen=True)
class Case:
    """One model/batch configuration and how many steps to time.

    Rounds go on until ``min_rounds`` are done and either ``max_rounds`` are done or the timed
    rounds have taken ``budget_s`` (a loaded machine gets fewer rounds, never fewer than the
    minimum).
    """

    name: str
    arch: dict[str, int]
    batch: int
    seq_len: int
    min_rounds: int
    max_rounds: int
    steps_per_round: int
    warmup_steps: int
    budget_s: float


def cases(quick: bool) -> list[Case]:
    """The small byte-vocabulary config and GPT-2 124M (full runs only)."""
    small = {"n_layer": 4, "n_embd": 256, "n_head": 4, "n_positions": 256, "vocab_size": 256}
    gpt2 = {"n_layer": 12, "n_embd": 768, "n_head": 12, "n_positions": 1024, "vocab_size": 50257}
    if quick:
        return [Case("small (4L, d=256, byte vocab)", small, 8, 256, 2, 2, 2, 1, 0.0)]
    return [
        Case("small (4L, d=256, byte vocab)", small, 8, 256, 3, 6, 3, 2, 90.0),
        # Every GPT-2 step is ~1.8 TFLOP; each side has already run one step during set-up.
        Case("GPT-2 124M", gpt2, 2, 1024, 2, 4, 1, 0, 300.0),
    ]


def run_case(case: Case) -> dict[str, Any]:
    """Time both sides on ``case``; raw numbers."""
    env = {"OMP_NUM_THREADS": str(THREADS), "MKL_NUM_THREADS": str(THREADS)}
    config = {"arch": case.arch, "hparams": HPARAMS, "batch": case.batch,
              "seq_len": case.seq_len, "threads": THREADS, "attention": ZOO_ATTENTION}  # fmt: skip
    workers: dict[str, Worker] = {}
    try:
        # One at a time, so neither compiles while the other is being set up.
        for side in SIDES:
            workers[side] = Worker("bench.training_worker", {**config, "framework": side}, env)
            workers[side].hello  # noqa: B018 - wait for its set-up
        for side in SIDES if case.warmup_steps else ():
            workers[side].ask("run", steps=case.warmup_steps)
        peaks_before = {side: w.ask("peak") for side, w in workers.items()}
        times: dict[str, list[float]] = {side: [] for side in SIDES}
        rounds: list[dict[str, float]] = []
        start = time.perf_counter()
        while len(rounds) < case.min_rounds or (
            len(rounds) < case.max_rounds and time.perf_counter() - start < case.budget_s
        ):
            rounds.append({})
            for side in SIDES:  # A B A B
                reply = workers[side].ask("run", steps=case.steps_per_round)
                times[side].extend(reply["times"])
                rounds[-1][side] = median(reply["times"])
        peaks_after = {side: w.ask("peak") for side, w in workers.items()}
        shapes = gemm_shapes(
            case.batch * case.seq_len, case.arch["n_embd"], case.arch["vocab_size"]
        )
        gemms = {side: w.ask("gemms", shapes=shapes) for side, w in workers.items()}
        heads = case.arch["n_head"]
        shape = [case.batch, case.seq_len, heads, case.arch["n_embd"] // heads]
        attention = {side: w.ask("attention", shape=shape) for side, w in workers.items()}
        hello = {side: w.hello for side, w in workers.items()}
    finally:
        for w in workers.values():
            w.close()
    return {
        "case": dataclasses.asdict(case), "hello": hello, "times_s": times, "rounds": rounds,
        "peaks": {"before": peaks_before, "after": peaks_after}, "gemms": gemms,
        "gemm_shapes": shapes, "attention": attention,
    }  # fmt: skip


def summarise(raw: dict[str, Any]) -> dict[str, Any]:
    """Medians, tokens/s, ratio, MFU and the step's breakdown from :func:`run_case`'s numbers."""
    case, arch = raw["case"], raw["case"]["arch"]
    tokens = case["batch"] * case["seq_len"]
    matmul_params = gpt2_matmul_params(
        raw["hello"]["zoo"]["num_params"], arch["n_positions"], arch["n_embd"]
    )
    per_token = flops_per_token(matmul_params, arch["n_layer"], case["seq_len"], arch["n_embd"])
    # The best of each measurement: the closest to what the machine can do between load bursts.
    # A GEMM at a model's own shape may beat the square matmul; the peak is then that rate, so
    # no MFU or "% of peak" can exceed 100%.
    peaks = {
        side: max(
            *(raw["peaks"][when][side]["gflops_best"] for when in ("before", "after")),
            *raw["gemms"][side].values(),
        )
        for side in SIDES
    }
    peak = max(peaks.values())
    out: dict[str, Any] = {
        "tokens_per_step": tokens, "flops_per_token": per_token, "peak_gflops": peak,
        "jax_peak_gflops": peaks["zoo"], "torch_peak_gflops": peaks["hf"],
    }  # fmt: skip
    for side in SIDES:
        step = median(raw["times_s"][side])
        tps = tokens / step
        out[side] = {
            "step_s": step, "tokens_per_s": tps, "model_gflops": tps * per_token / 1e9,
            "mfu": tps * per_token / 1e9 / peak, "num_params": raw["hello"][side]["num_params"],
            "breakdown": _breakdown(raw, side, step),
        }  # fmt: skip
    out["ratio"] = out["zoo"]["tokens_per_s"] / out["hf"]["tokens_per_s"]
    out["round_ratios"] = [r["hf"] / r["zoo"] for r in raw["rounds"]]
    return out


def _breakdown(raw: dict[str, Any], side: str, step_s: float) -> dict[str, Any]:
    """Seconds of one step in matmuls, attention and the rest, from isolated timings (see the
    breakdown table's notes)."""
    layers = raw["case"]["arch"]["n_layer"]
    matmul = sum(
        (1 if gemm == "head" else layers) * 3 * 2.0 * m * k * n / (raw["gemms"][side][gemm] * 1e9)
        for gemm, (m, k, n) in raw["gemm_shapes"].items()
    )
    attention = layers * raw["attention"][side]["seconds"]
    return {"matmul_s": matmul, "attention_s": attention, "rest_s": step_s - matmul - attention,
            "attention_kernel": raw["attention"][side]["kernel"]}  # fmt: skip


def _throughput_table(result: dict[str, Any]) -> dict[str, Any]:
    rows = []
    for entry in result["data"].values():
        raw, summary = entry["raw"], entry["summary"]
        z, h = summary["zoo"], summary["hf"]
        first = (
            f"{raw['hello']['zoo']['first_step_s']:.1f} / {raw['hello']['hf']['first_step_s']:.1f}"
        )
        rows.append([raw["case"]["name"], f"{raw['case']['batch']}×{raw['case']['seq_len']}",
                     fmt(z["tokens_per_s"]), fmt(h["tokens_per_s"]), f"{summary['ratio']:.2f}×",
                     f"{100 * z['mfu']:.1f}%", f"{100 * h['mfu']:.1f}%",
                     fmt(summary["peak_gflops"]), first])  # fmt: skip
    kernels = ", ".join(
        sorted({str(e["raw"]["hello"]["zoo"]["attention"]) for e in result["data"].values()})
    )
    return table(
        "Training throughput (median over interleaved rounds)",
        [
            "config",
            "batch×T",
            "zoo tok/s",
            "HF tok/s",
            "zoo/HF",
            "zoo MFU",
            "HF MFU",
            "peak GFLOP/s",
            "first step s (zoo/HF)",
        ],
        rows,
        [
            FORMULA,
            "Peak: the highest float32 matmul rate measured in the run: the best of 7 timings "
            "of a 2048² matmul, taken by jax and by torch before and after the timed rounds, "
            "and each framework's rate at the models' GEMM shapes (table below).",
            "First step: compile (zoo) or first eager step (HF), not included in tokens/s.",
            f"zoo runs as a user gets it: default attention kernel (`{kernels}` here), layers "
            "unrolled on CPU, the train step's CPU compiler options; transformers its "
            "default attention (`sdpa`). Optimizers: optax.adamw and the fused "
            "torch.optim.AdamW, lr 3e-4, betas (0.9, 0.95), eps 1e-8, weight decay 0.1 on "
            "every parameter, constant schedule, no clipping.",
        ],
    )


def _gemm_table(data: dict[str, Any]) -> dict[str, Any]:
    rows = []
    for name, entry in data.items():
        raw, summary = entry["raw"], entry["summary"]
        peak, layers = summary["peak_gflops"], raw["case"]["arch"]["n_layer"]
        weights = {g: 2.0 * m * k * n * (1 if g == "head" else layers)
                   for g, (m, k, n) in raw["gemm_shapes"].items()}  # fmt: skip
        total = sum(weights.values())
        eff = {
            s: sum(weights[g] / total * raw["gemms"][s][g] / peak for g in weights) for s in SIDES
        }
        summary["gemm_efficiency"] = eff
        for gemm, (m, k, n) in raw["gemm_shapes"].items():
            z, h = raw["gemms"]["zoo"][gemm], raw["gemms"]["hf"][gemm]
            rows.append([name, gemm, f"{m}×{k}×{n}", fmt(z), f"{100 * z / peak:.0f}%", fmt(h),
                         f"{100 * h / peak:.0f}%"])  # fmt: skip
        rows.append([name, "FLOP-weighted", "", "", f"{100 * eff['zoo']:.0f}%", "",
                     f"{100 * eff['hf']:.0f}%"])  # fmt: skip
    return table(
        "Matmul throughput at the models' forward GEMM shapes (M×K×N), % of the measured peak",
        ["config", "GEMM", "shape", "jax GFLOP/s", "jax %peak", "torch GFLOP/s", "torch %peak"],
        rows,
        [
            "The FLOP-weighted row bounds the MFU a step can reach if every matmul ran as fast as "
            "it does alone and nothing else took time."
        ],
    )


def _breakdown_table(data: dict[str, Any]) -> dict[str, Any]:
    rows = []
    for name, entry in data.items():
        for side, label in (("zoo", "zoo"), ("hf", "transformers")):
            step, part = entry["summary"][side]["step_s"], entry["summary"][side]["breakdown"]
            share = lambda key, part=part, step=step: (
                f"{part[key]:.2f} ({100 * part[key] / step:.0f}%)"
            )
            rows.append([name, label, f"{step:.2f}", share("matmul_s"),
                         f"{share('attention_s')} {part['attention_kernel']}", share("rest_s")])  # fmt: skip
    return table(
        "Where a training step goes (seconds per step; parts timed alone in the same run)",
        ["config", "framework", "step s", "matmuls s", "attention s (kernel)", "rest s"],
        rows,
        [
            "Matmuls: every projection and the output head, forward and both backward products "
            "(3 × 2·M·K·N FLOPs each), at the rate each framework reached at that forward shape "
            "alone (table above).",
            "Attention: one causal forward+backward per layer, timed alone at the step's shape "
            "(zoo: its default kernel, compiled with the train step's options; transformers: "
            "`scaled_dot_product_attention`).",
            "Rest: the measured step minus both; softmax and cross entropy over the vocabulary, "
            "GELU, norms, residual adds, the optimizer and framework overhead.",
        ],
    )


def run(quick: bool) -> dict[str, Any]:
    """Both configurations; a result dict (see :mod:`bench.harness`)."""
    result = new_result(NAME, TITLE, quick)
    for case in cases(quick):
        result["data"][case.name] = {"raw": run_case(case)}
    if quick:
        result["notes"].append("GPT-2 124M is timed only in the full run (`make bench`).")
    return report(result)


def report(result: dict[str, Any]) -> dict[str, Any]:
    """Summaries, tables and targets of ``result``, derived from its raw numbers alone, so a
    change in how they are read applies to a stored run (``python -m bench.run --docs-only``)."""
    result["targets"] = []
    for entry in result["data"].values():
        summary = entry["summary"] = summarise(entry["raw"])
        name = entry["raw"]["case"]["name"]
        result["targets"].append(target(f"{name}: zoo ≥ {RATIO_TARGET}× transformers tokens/s",
                                        f"{summary['ratio']:.2f}×", summary["ratio"] >= RATIO_TARGET))  # fmt: skip
        if entry["raw"]["case"]["arch"]["n_layer"] == 12:
            mfu = summary["zoo"]["mfu"]
            result["targets"].append(target(
                f"{name}: zoo MFU ≥ {100 * MFU_TARGET:.0f}% of the measured matmul peak",
                f"{100 * mfu:.1f}%", mfu >= MFU_TARGET,
            ))  # fmt: skip
    data = result["data"]
    result["tables"] = [_throughput_table(result), _gemm_table(data), _breakdown_table(data)]
    return result


def plot(result: dict[str, Any], directory: pathlib.Path) -> list[str]:
    """Tokens/s of both sides per config, with every timed step as a dot."""
    cases = list(result["data"].items())
    fig, axes = figure(1, len(cases), figsize=(4.2 * len(cases), 3.6), squeeze=False)
    for ax, (name, entry) in zip(axes[0], cases, strict=True):
        summary = entry["summary"]
        for i, side in enumerate(SIDES):
            per_step = [summary["tokens_per_step"] / t for t in entry["raw"]["times_s"][side]]
            ax.bar(i, summary[side]["tokens_per_s"], color=("C0", "C1")[i], alpha=0.7)
            ax.plot([i] * len(per_step), per_step, "k.", ms=4)
        ax.set_xticks([0, 1], ["zoo (jax)", "transformers (torch)"])
        ax.set_ylabel("tokens / s")
        ax.set_title(f"{name}\nzoo/HF = {summary['ratio']:.2f}×", fontsize=9)
    return [save_figure(fig, directory / "training.png")]
