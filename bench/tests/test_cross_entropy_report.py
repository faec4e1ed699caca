"""The fused cross-entropy benchmark's report: tables and targets derived again from stored
raw numbers."""

from __future__ import annotations

import numpy as np

from bench import cross_entropy


def _result(rng: np.random.Generator, saved_mib: float, speed: float, drift: float) -> dict:
    setup = cross_entropy._setup(quick=True)
    losses = rng.uniform(10, 11, cross_entropy.STEPS)
    steps = {
        "logits": [{"loss": float(v), "seconds": 2.0} for v in losses],
        "fused_xla": [{"loss": float(v) * (1 + drift), "seconds": 2.0 / speed} for v in losses],
    }
    hello = {s: {"kernel": [f"{s} 1.3.0"], "temp_bytes": 2**30, "compile_s": 1.0, "num_params": 1}
             for s in cross_entropy.SIDES}  # fmt: skip
    rss = {"logits": 4 * 2**30, "fused_xla": 4 * 2**30 - int(saved_mib * 2**20)}
    return {"quick": True, "data": {"setup": setup, "hello": hello, "steps": steps, "rss": rss}}


def test_targets_follow_the_numbers() -> None:
    rng = np.random.default_rng()
    logits_mib = 512 * 50257 * 4 / 2**20
    met = cross_entropy.report(_result(rng, 0.9 * logits_mib, 1.0, 1e-8))
    assert [t["met"] for t in met["targets"]] == [True, True, True]
    missed = cross_entropy.report(_result(rng, -9.0, 0.78, 1e-5))
    assert [t["met"] for t in missed["targets"]] == [False, False, False]
    (table,) = missed["tables"]
    assert [row[0] for row in table["rows"]] == list(cross_entropy.SIDES)
