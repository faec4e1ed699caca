"""Benchmark results: one JSON file per benchmark, plus the shape every result shares.

A result is a dict: ``name``, ``title``, ``quick``, ``status`` ("ok" or "unavailable"),
``reason`` (when unavailable), ``machine``, ``tables`` (each ``{"title", "columns", "rows",
"notes"}`` with cells already formatted), ``targets`` (each ``{"target", "measured", "met"}``
with ``met`` true, false or null when not measured), ``notes``, ``plots`` (file names next to
the JSON) and ``data`` (raw numbers).
"""

from __future__ import annotations

import json
import pathlib
from typing import Any

RESULTS_DIR = pathlib.Path(__file__).resolve().parents[1] / "results"


def results_dir(quick: bool) -> pathlib.Path:
    """``bench/results`` for full runs, ``bench/results/quick`` for ``--quick`` runs."""
    return RESULTS_DIR / "quick" if quick else RESULTS_DIR


def new_result(name: str, title: str, quick: bool) -> dict[str, Any]:
    """An empty result (status "ok") to fill in."""
    return {
        "name": name,
        "title": title,
        "quick": quick,
        "status": "ok",
        "reason": None,
        "machine": None,
        "tables": [],
        "targets": [],
        "notes": [],
        "plots": [],
        "data": {},
    }


def unavailable(name: str, title: str, quick: bool, reason: str) -> dict[str, Any]:
    """A result that says why the benchmark could not run, with no numbers."""
    result = new_result(name, title, quick)
    result["status"] = "unavailable"
    result["reason"] = reason
    return result


def table(
    title: str, columns: list[str], rows: list[list[str]], notes: list[str] | None = None
) -> dict:
    """A formatted table."""
    return {"title": title, "columns": columns, "rows": rows, "notes": notes or []}


def target(text: str, measured: str, met: bool | None) -> dict[str, Any]:
    """A target, what was measured, and whether it was met (``None``: not measured)."""
    return {"target": text, "measured": measured, "met": met}


def write_result(result: dict[str, Any], directory: pathlib.Path) -> pathlib.Path:
    """Write ``<directory>/<name>.json``."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{result['name']}.json"
    path.write_text(json.dumps(result, indent=1, sort_keys=False) + "\n")
    return path


def read_results(directory: pathlib.Path) -> dict[str, dict[str, Any]]:
    """Every ``*.json`` result in ``directory``, by name."""
    out = {}
    for path in sorted(directory.glob("*.json")):
        try:
            data = json.loads(path.read_text())
        except json.JSONDecodeError:
            continue
        if isinstance(data, dict) and "name" in data and "tables" in data:
            out[data["name"]] = data
    return out


def fmt(value: float | None, digits: int = 3) -> str:
    """A number with ``digits`` significant digits, or "—"."""
    if value is None:
        return "—"
    if value == 0:
        return "0"
    return f"{value:.{digits}g}" if abs(value) < 10**digits else f"{value:,.0f}"
