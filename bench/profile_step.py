"""Where the time of the GPT-2 124M CPU train step goes, read with zoo's own profiler tools.

Trains GPT-2 124M with the training benchmark's shapes (float32, AdamW, random tokens) through
``zoo_train.train`` with a profile window, in a subprocess, then reads ``zoo profile``'s
summary of the trace: time per step by category and the
top operations. It sits next to the transformers comparison, whose step it explains.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from typing import Any

from .harness import new_result, table, target

NAME = "profile"
TITLE = "Where the GPT-2 124M train step's time goes (CPU, zoo profile)"
TOLERANCE = 0.10


def _setup(out: str, quick: bool) -> dict[str, Any]:
    gpt2 = {"n_layer": 12, "n_embd": 768, "n_head": 12, "n_positions": 1024, "vocab_size": 50257}
    if quick:
        gpt2.update(n_layer=2, n_positions=256)
    return {"out": out, "arch": gpt2, "batch": 2, "seq_len": gpt2["n_positions"], "steps": 4,
            "profile": [2, 3]}  # fmt: skip


def run(quick: bool) -> dict[str, Any]:
    from zoo_train.profile import summarize

    env = {**os.environ, "OMP_NUM_THREADS": "2", "JAX_PLATFORMS": "cpu"}
    with tempfile.TemporaryDirectory() as out:
        setup = _setup(out, quick)
        worker = [sys.executable, "-m", "bench.profile_worker", json.dumps(setup)]
        subprocess.run(worker, check=True, env=env)
        summary = summarize(out, top=8)
    result = new_result(NAME, TITLE, quick)
    result["data"] = summary.to_json()
    step = summary.step_ms
    rows = [[name, f"{ms:,.1f}", f"{ms / step:.1%}"] for name, ms in summary.categories.items()]
    rows.append(["step (trace)", f"{step:,.1f}", "100%"])
    wall: float = summary.meta["wall_ms_per_step"]  # the capture always records it
    config = "GPT-2 124M" if not quick else "GPT-2 with 2 layers"
    result["tables"].append(
        table(
            f"{config}, batch 2 x {setup['seq_len']} tokens: time per step by category",
            ["category", "ms / step", "share"],
            rows,
            [
                f"Steps {summary.meta['steps'][0]}–{summary.meta['steps'][1]} of `zoo_train.train`, "
                f"attention kernel {summary.meta.get('kernel')}; the loop's own clock gave "
                f"{wall:,.1f} ms per step. Time during which several operations ran at once is "
                "shared between them; time inside the step's program that no operation's event "
                "covers goes to the operation that ended last (XLA:CPU's Eigen dots are "
                "asynchronous: their events end when the work is handed out)."
            ],
        )
    )
    result["tables"].append(
        table(
            "Top operations",
            ["operation", "category", "calls / step", "ms / step"],
            [
                [o["name"], o["category"], f"{o['calls']:g}", f"{o['ms']:,.1f}"]
                for o in summary.top_ops
            ],
            [],
        )
    )
    gap = abs(step - wall) / wall
    result["targets"].append(
        target(
            f"categories add up to the loop's clock within {TOLERANCE:.0%}",
            f"{gap:.1%}",
            gap <= TOLERANCE,
        )
    )
    return result
