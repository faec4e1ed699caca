"""The MaxText comparison's search for the largest batch (against memory models whose answer is
known) and its report (targets decided from stored compiles), without compiling anything."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from bench import versus_maxtext as vm

GIB = 2**30
HBM = 96 * GIB


Peak = Callable[[int], int]


def _linear(rng: np.random.Generator) -> Peak:
    fixed, per_row = rng.uniform(5, 40), rng.uniform(0.5, 6)
    return lambda rows: int((fixed + per_row * rows) * GIB)


def _convex(rng: np.random.Generator) -> Peak:
    # A step whose peak grows faster than the line the search draws.
    fixed, per_row = rng.uniform(5, 30), rng.uniform(0.5, 3)
    return lambda rows: int((fixed + per_row * rows + 0.04 * rows * rows) * GIB)


MODELS = {"linear": _linear, "convex": _convex}


@pytest.mark.parametrize("model", sorted(MODELS))
@pytest.mark.parametrize("start", [1, 4, 16])
@pytest.mark.parametrize("seed", range(4))
def test_the_search_finds_the_edge_in_few_compiles(model: str, start: int, seed: int) -> None:
    peak = MODELS[model](np.random.default_rng(seed))
    answer = max((r for r in range(1, 400) if peak(r) <= HBM), default=0)
    compiled: list[int] = []

    def probe(rows: int) -> dict[str, Any]:
        compiled.append(rows)
        return {"rows": rows, "fits": peak(rows) <= HBM, "peak_bytes": peak(rows)}

    best, seen = vm.largest_rows(probe, start, HBM, limit=400)
    assert best == answer
    assert len(compiled) == len(set(compiled)) == len(seen)
    if answer:  # the edge is bracketed by a compile on each side
        assert seen[answer]["fits"] and not seen[answer + 1]["fits"]
    assert len(compiled) <= (7 if model == "linear" else 12), compiled


def test_a_compile_that_neither_fits_nor_runs_out_of_memory_stops_the_search() -> None:
    def probe(rows: int) -> dict[str, Any]:
        return {"rows": rows, "fits": None, "error": "INTERNAL: boom"}

    with pytest.raises(RuntimeError, match="boom"):
        vm.largest_rows(probe, 4, HBM)


def _compile(rows: int, peak_gib: float, fits: bool, layers: bool = False) -> dict[str, Any]:
    temps = [{"bytes": int(peak_gib / 2 * GIB), "shape": "bf16[32,4,8192,4096]",
              "name": "jvp(layers)/while"}] if layers else []  # fmt: skip
    return {
        "rows": rows,
        "fits": fits,
        "peak_bytes": int(peak_gib * GIB),
        "peak": {
            "argument_bytes": 22 * GIB,
            "temporary_bytes": int((peak_gib - 22) * GIB),
            "largest_temporaries": temps,
        },
    }


def _case(zoo_best: int, zoo_peaks: dict[int, float], maxtext_peaks: dict[int, float]) -> dict:
    compiles = {
        "zoo": [_compile(r, p, p <= 95, layers=True) for r, p in zoo_peaks.items()],
        "maxtext": [_compile(r, p, p <= 95) for r, p in maxtext_peaks.items()],
        "maxtext_tiled": [_compile(r, p - 10, p - 10 <= 95) for r, p in maxtext_peaks.items()],
    }
    return {
        "model": "llama-3.1-8b",
        "topology": "v5p:2x2x1",
        "chips": 4,
        "maxtext_topology": "v5p-8",
        "target": None,
        "best": {"zoo": zoo_best, "maxtext": 11, "maxtext_tiled": 18},
        "compiles": compiles,
        "fresh": {"compiles": 3, "seconds": 400.0},
    }


@pytest.mark.parametrize(("zoo_best", "fits_at_18"), [(23, True), (22, True), (23, False)])
def test_the_report_decides_the_targets_from_the_stored_compiles(
    zoo_best: int, fits_at_18: bool
) -> None:
    # MaxText tiled is 10 GiB lighter than as it comes: at 4 rows 40, at 18 rows 89. zoo fits at
    # 18 rows below it, or does not fit there (then only 4 rows compare).
    zoo = {4: 38.0, 18: 80.0 if fits_at_18 else 96.5, zoo_best: 94.0}
    maxtext = {4: 50.0, 18: 99.0}
    case = _case(zoo_best, zoo, maxtext)
    result = {"data": {"seq_len": 8192, "cases": [case], "wall_s": 60, "cache_hits": 1}}
    out = vm.report(result)
    batch, lighter_target = out["targets"]
    assert batch["met"] is (zoo_best >= 23)  # 1.25 x 18 = 22.5
    assert "layers' inputs live at zoo's peak" in batch["measured"]
    assert lighter_target["met"] is True
    compared = lighter_target["measured"]
    assert compared == (
        "compared at 4, 18 rows a chip" if fits_at_18 else "compared at 4 rows a chip"
    )
    _side, best, parts = out["tables"]
    assert best["rows"][0][2:5] == [f"{zoo_best} ({4 * zoo_best})", "11 (44)", "18 (72)"]
    assert parts["rows"][0][-1] == "jvp(layers)/while"
