"""The data benchmark's report: tables and targets derived again from stored raw numbers."""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import pytest

from bench import data as bench_data


def _prepare(rng: np.random.Generator, mb: float) -> dict[str, Any]:
    seconds = float(rng.uniform(1, 600))
    return {
        "mb": mb, "seconds": seconds, "mb_per_s": mb / seconds,
        "mb_per_cpu_s": float(rng.uniform(1, 5)), "tokens": int(mb * 2.5e5),
        "store_mib": mb / 2, "rss_at_start_mib": 30.0,
        "peak_rss_main_mib": float(rng.uniform(100, 900)),
        "peak_rss_worker_mib": float(rng.uniform(50, 300)),
    }  # fmt: skip


def _raw(rng: np.random.Generator, sizes: dict[str, int], repeats: int) -> dict[str, Any]:
    """Raw numbers in the shape the workers return them, drawn at random."""
    # Prepare's rate against the baseline's, and each side's gain from a second thread, drawn
    # around the targets' thresholds.
    factor = {"baseline": 1.0, "prepare": float(rng.uniform(0.6, 1.2))}
    gain = {side: float(rng.uniform(0.7, 2.0)) for side in factor}
    rates = [
        {"side": side, "threads": t, "mb_per_s": float(rng.uniform(1.9, 2.1)) * factor[side]
         * (gain[side] if t == 2 else 1.0), "mb_per_cpu_s": float(rng.uniform(1, 6))}
        for _ in range(repeats) for t in (1, 2) for side in ("baseline", "prepare")
    ]  # fmt: skip
    loader = lambda: {
        "store_mib": 1.0, "open_s": 1e-3, "first_batch_s": float(rng.uniform(2e-3, 2e-2)),
        "median_us": float(rng.uniform(60, 115)), "p99_us": 900.0, "half_median_us": 50.0,
        "batches": 4051, "rss_imported_mib": 200.0, "rss_mib": float(rng.uniform(200, 500)),
    }  # fmt: skip
    boundary = lambda: {
        "rows_per_epoch": 1000, "single_pass_median_us": 90.0,
        "single_pass_slowest_at_boundary_us": 400.0, "single_pass_slowest_overall_us": 5000.0,
        "repeated_median_us": 80.0, "repeated_slowest_at_boundary_us": 0.0,
        "ratio": float(rng.uniform(0.9, 2.6)),
    }  # fmt: skip
    half = bench_data.BATCH * bench_data.SEQ // 2
    short = int(rng.integers(2))  # a process given fewer tokens than its half, sometimes
    return {
        "sizes_mb": sizes, "repeats": repeats, "rates": rates,
        "prepare": {n: _prepare(rng, sizes[n]) for n in ("small", "large", "tiny")},
        "loader": {n: [loader() for _ in range(repeats)] for n in ("tiny", "large")},
        "boundary": [boundary() for _ in range(repeats)],
        "processes": {
            "batches": 200, "global_tokens_per_batch": 2 * half,
            "rows_per_batch": [[8, 8], [8, 8]],
            "tokens_per_batch": [[half - short, half], [half, half]],
            "tokens_read": [200 * half, 200 * half], "row_bytes": 2050,
            "bytes_read": [3_280_000, 3_280_000], "bytes_read_one_process": 6_560_000,
            "same_batches": bool(rng.integers(2)),
        },
        "libraries": [
            {"tokens": 20_000_000, **{k: float(rng.uniform(30, 1500)) for k in bench_data.LIBRARIES}}
            for _ in range(repeats)
        ],
    }  # fmt: skip


def _expected(raw: dict[str, Any], full: bool) -> list[bool | None]:
    """Each target's verdict, computed here from the raw numbers."""
    med = lambda side, t: float(np.median(
        [r["mb_per_s"] for r in raw["rates"] if r["side"] == side and r["threads"] == t]
    ))  # fmt: skip
    prepare_ok = all(med("prepare", t) / med("baseline", t) >= 0.8 for t in (1, 2))
    two, base_two = med("prepare", 2) / med("prepare", 1), med("baseline", 2) / med("baseline", 1)
    scaling = two >= 1.5 if max(two, base_two) >= 1.5 else None
    rss = all(
        p["peak_rss_main_mib"] + 2 * p["peak_rss_worker_mib"] <= 1024
        for n, p in raw["prepare"].items()
        if n != "tiny"
    )
    loader = {n: raw["loader"][n] for n in ("tiny", "large")}
    m = lambda n, k: float(np.median([r[k] for r in loader[n]]))
    rss_close = abs(m("large", "rss_mib") - m("tiny", "rss_mib")) <= 100
    first_close = m("large", "first_batch_s") <= 1.1 * m("tiny", "first_batch_s")
    boundary = max(r["ratio"] for r in raw["boundary"]) <= 2.0
    per_batch = max(m("tiny", "median_us"), m("large", "median_us")) <= 100
    p = raw["processes"]
    halves = p["tokens_per_batch"] == [[8192, 8192], [8192, 8192]] and p["same_batches"]
    return [
        prepare_ok, scaling, rss if full else None, rss_close if full else None,
        first_close if full else None, boundary, per_batch, halves,
    ]  # fmt: skip


@pytest.mark.parametrize("seed", range(10))
@pytest.mark.parametrize("quick", [False, True])
def test_targets_follow_the_raw_numbers(seed: int, quick: bool) -> None:
    rng = np.random.default_rng(seed)
    sizes = bench_data.SIZES_MB[quick]
    raw = _raw(rng, sizes, repeats=int(rng.integers(2, 4)))
    result = bench_data.new_result(bench_data.NAME, bench_data.TITLE, quick)
    result["data"] = copy.deepcopy(raw)
    got = bench_data.report(result)
    assert [t["met"] for t in got["targets"]] == _expected(raw, full=not quick)
    assert got["data"] == raw  # the raw numbers are left as they were
    assert len(got["tables"]) == 6
    for t in got["tables"]:
        assert all(len(row) == len(t["columns"]) for row in t["rows"]), t["title"]
    # Rebuilt from the stored numbers alone (what --docs-only does), nothing changes.
    stale = {**copy.deepcopy(got), "tables": [], "targets": []}
    assert bench_data.report(stale) == got
