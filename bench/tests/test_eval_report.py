"""The eval benchmark's report: rates, ratios, compile time and the target from stored passes."""

from __future__ import annotations

import numpy as np
import pytest

from bench import eval_harness


def _passes(rng: np.random.Generator, scale: float, rounds: int) -> list[dict[str, float]]:
    base = {k: float(rng.uniform(0.5, 2.0)) for k in eval_harness.KINDS}
    first = {k: v * scale + 3.0 for k, v in base.items()}  # the first pass: 3 s more
    return [first] + [{k: v * scale for k, v in base.items()} for _ in range(rounds)]


@pytest.mark.parametrize("speed", [0.5, 2.0])
def test_the_report_divides_requests_by_the_later_passes(speed: float) -> None:
    rng = np.random.default_rng(0)
    hf = _passes(rng, 1.0, 3)
    zoo = [{k: v / speed for k, v in p.items()} for p in hf]  # zoo `speed` times as fast
    requests = {
        k: int(n) for k, n in zip(eval_harness.KINDS, rng.integers(10, 500, 3), strict=True)
    }
    result = eval_harness.report({
        "data": {"setup": {"docs": 8, "batch_size": 4, "rounds": 3}, "shape": eval_harness.SHAPE,
                 "requests": requests, "passes": {"zoo": zoo, "hf": hf}},
    })  # fmt: skip
    rows = result["tables"][0]["rows"]
    for row, kind in zip(rows, eval_harness.KINDS, strict=False):  # the last row: all
        assert row[0] == kind and row[4] == f"{speed:.2f}x"
        assert float(row[2]) == pytest.approx(requests[kind] / hf[1][kind] * speed, abs=0.05)
        assert float(row[5]) == pytest.approx(3.0 / speed, abs=0.05)
    assert rows[-1][4] == f"{speed:.2f}x"
    assert result["targets"][0]["met"] is (speed >= 1.0)
