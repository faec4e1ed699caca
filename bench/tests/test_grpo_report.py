"""The GRPO benchmark's report: phase medians over the later steps, tokens per second of each
library, and the targets, from stored numbers."""

from __future__ import annotations

import numpy as np
import pytest

from bench import grpo


def _data(rng: np.random.Generator, speed: float, recompiles: int) -> dict:
    setup = {"prompts_per_step": 4, "num_generations": 4, "prompt_tokens": 16, "new_tokens": 32}
    phases = {p: float(rng.uniform(0.01, 0.5)) for p in grpo.PHASES}
    hf = phases["sampling"] * speed  # zoo samples `speed` times as fast
    first = {**{p: v + 5.0 for p, v in phases.items()}, "compiles": 7, "hf": 9.0}
    steps = [first] + [{**phases, "compiles": 0, "hf": hf} for _ in range(3)]
    steps[-1]["compiles"] = recompiles
    return {"setup": setup, "shape": grpo.SHAPE, "rows": 16, "steps": steps}


@pytest.mark.parametrize(("speed", "recompiles"), [(0.5, 0), (3.0, 0), (3.0, 2)])
def test_the_report_splits_the_later_steps_and_compares_rates(
    speed: float, recompiles: int
) -> None:
    data = _data(np.random.default_rng(), speed, recompiles)
    result = grpo.report({"data": data})
    phases, rates = result["tables"]
    later = data["steps"][1]
    total = sum(later[p] for p in grpo.PHASES)
    for row, p in zip(phases["rows"], grpo.PHASES, strict=False):
        assert row[0] == p and float(row[1]) == pytest.approx(later[p] * 1e3, abs=0.05)
    assert float(phases["rows"][-1][1]) == pytest.approx(total * 1e3, abs=0.05)
    tokens = 16 * 32
    assert float(rates["rows"][0][1].replace(",", "")) == pytest.approx(
        tokens / later["sampling"], abs=1
    )
    assert rates["rows"][0][2] == f"{speed:.2f}x"
    speed_target, compile_target = result["targets"]
    assert speed_target["met"] is (speed >= 1.0)
    assert compile_target["met"] is (recompiles == 0)
