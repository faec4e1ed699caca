"""lm-eval's results as the table lm-eval prints, written here: its own writer needs a
pytablewriter whose header API the pinned one lacks (it printed headers ``A | B | … | I``), and
it formats cells in a process pool, a fork of a process running JAX's threads."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

COLUMNS = ("Tasks", "Version", "Filter", "n-shot", "Metric", "", "Value", "", "Stderr")
# Not in the table: what lm-eval keeps beside the scores.
_SKIPPED = ("alias", "name", "sample_len", "sample_count")


def _number(value: Any) -> str:
    return f"{value:.4f}" if isinstance(value, float) else str(value)


def _task_rows(results: Mapping[str, Any], task: str) -> list[list[str]]:
    scores = dict(results["results"][task])
    better = results.get("higher_is_better", {}).get(task, {})
    name, version = (
        str(scores.get("alias", task)),
        str(results.get("versions", {}).get(task, "N/A")),
    )
    shots = str(results.get("n-shot", {}).get(task, ""))
    rows = []
    for key, value in sorted(scores.items()):
        metric, _, filt = key.partition(",")
        if key in _SKIPPED or metric.endswith("_stderr"):
            continue
        arrow = {True: "↑", False: "↓"}.get(better.get(metric), "")
        stderr = scores.get(f"{metric}_stderr,{filt}")
        spread = ["±", _number(stderr)] if stderr is not None else ["", ""]
        rows.append([name, version, filt, shots, metric, arrow, _number(value), *spread])
        name = version = ""  # a task's name and version on its first row only
    return rows


def results_table(results: Mapping[str, Any]) -> str:
    """The markdown table of ``results["results"]``: one row per task and metric, lm-eval's
    columns (task, version, filter, shots, metric, higher is better, value, standard error)."""
    rows = [row for task in results.get("results", {}) for row in _task_rows(results, task)]
    widths = [max(len(c), *(len(r[i]) for r in rows)) for i, c in enumerate(COLUMNS)]

    def line(cells: tuple[str, ...] | list[str]) -> str:
        return "|" + "|".join(f" {c.ljust(w)} " for c, w in zip(cells, widths, strict=True)) + "|"

    rule = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    return "\n".join([line(COLUMNS), rule, *(line(r) for r in rows)])
