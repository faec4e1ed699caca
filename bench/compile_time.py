"""Compile time of zoo's train step against depth: layers under one scan vs unrolled.

``ModelConfig.scan_layers=True`` runs the layers under one ``lax.scan`` (the default on
accelerators); ``False`` unrolls them (the default on CPU), so XLA sees ``L`` copies of the block.
"""

from __future__ import annotations

import pathlib
import time
from typing import Any

from .harness import figure, new_result, save_figure, table
from .training_zoo import sum_loss, zoo_config

NAME = "compile"
TITLE = "Compile time of the train step against depth"
ARCH = {"n_embd": 256, "n_head": 4, "n_positions": 256, "vocab_size": 256}
BATCH, SEQ_LEN = 8, 256
MAX_UNROLLED = {True: 4, False: 8}  # unrolled compiles grow with depth; keep the sweep short


def depths(quick: bool) -> list[int]:
    """Depths swept."""
    return [1, 4] if quick else [1, 2, 4, 8, 16, 32]


def compile_step(n_layers: int, unrolled: bool) -> dict[str, float]:
    """Seconds to trace+lower and to compile one AdamW train step at ``n_layers``."""
    import jax
    import jax.numpy as jnp
    import optax

    import zoo_models
    import zoo_train

    config = zoo_config({**ARCH, "n_layer": n_layers}).replace(scan_layers=not unrolled)
    model = zoo_models.build(config, key=jax.random.key(0))
    optimizer = optax.adamw(3e-4, b1=0.9, b2=0.95, weight_decay=0.1)
    state = zoo_train.init_train_state(model, optimizer)
    step = zoo_train.make_train_step(optimizer, sum_loss, optax.constant_schedule(3e-4))
    ids = jnp.zeros((BATCH, SEQ_LEN), jnp.int32)
    batch = {"input_ids": ids, "targets": ids}
    start = time.perf_counter()
    lowered = step.lower(batch, state)
    lower_s = time.perf_counter() - start
    start = time.perf_counter()
    lowered.compile()
    compile_s = time.perf_counter() - start
    hlo_chars = len(lowered.as_text())
    return {"lower_s": lower_s, "compile_s": compile_s, "hlo_chars": hlo_chars}


def run(quick: bool) -> dict[str, Any]:
    """The sweep; a result dict (see :mod:`bench.harness`)."""
    result = new_result(NAME, TITLE, quick)
    rows, data = [], []
    for n in depths(quick):
        entry: dict[str, Any] = {"n_layers": n, "scan": compile_step(n, unrolled=False)}
        if 1 < n <= MAX_UNROLLED[quick]:  # at one layer both are the same program
            entry["unrolled"] = compile_step(n, unrolled=True)
        data.append(entry)
        s, u = entry["scan"], entry.get("unrolled")
        rows.append(
            [
                str(n),
                f"{s['lower_s']:.2f}",
                f"{s['compile_s']:.2f}",
                f"{s['hlo_chars'] / 1000:.0f}k",
                "—" if u is None else f"{u['lower_s']:.2f}",
                "—" if u is None else f"{u['compile_s']:.2f}",
                "—" if u is None else f"{u['hlo_chars'] / 1000:.0f}k",
            ]
        )
    result["data"] = {"depths": data, "arch": ARCH, "batch": BATCH, "seq_len": SEQ_LEN}
    result["tables"].append(
        table(
            f"Train step compile time (GPT-2 architecture, d={ARCH['n_embd']}, batch {BATCH}×{SEQ_LEN}, AdamW)",
            [
                "layers",
                "scan: trace+lower s",
                "scan: compile s",
                "scan: HLO size",
                "unrolled: trace+lower s",
                "unrolled: compile s",
                "unrolled: HLO size",
            ],
            rows,
            ["HLO size: characters of the lowered StableHLO text."],
        )
    )
    return result


def plot(result: dict[str, Any], directory: pathlib.Path) -> list[str]:
    """Compile time against depth, scan and unrolled."""
    fig, ax = figure(figsize=(5, 3.6))
    for kind, color in (("scan", "C0"), ("unrolled", "C1")):
        depths = [d for d in result["data"]["depths"] if kind in d]
        seconds = [d[kind]["lower_s"] + d[kind]["compile_s"] for d in depths]
        if depths:
            ax.plot([d["n_layers"] for d in depths], seconds, marker="o", color=color,
                    label=f"{kind} (trace+lower+compile)")  # fmt: skip
    ax.set_xscale("log", base=2)
    ax.set(xlabel="layers", ylabel="seconds", ylim=(0, None))
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title("train step compile time vs depth", fontsize=9)
    return [save_figure(fig, directory / "compile.png")]
