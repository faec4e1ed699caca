"""Profiles as tables for a terminal (rich)."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from .._provenance import kernel_label
from ._summary import Summary


def _ms(value: float) -> str:
    return f"{value:,.3f}"


def render_summary(summary: Summary, console: Console) -> None:
    """Print time per step by category, then the top operations."""
    meta = summary.meta
    console.print(f"trace: {summary.source}")
    about = f"{summary.steps} step{'s' if summary.steps != 1 else ''}"
    if meta.get("steps"):
        about += f" ({meta['steps'][0]}–{meta['steps'][1]})"
    if meta.get("kernel"):
        about += f"; attention kernel {meta['kernel']}"
    if meta.get("grouped_matmul"):
        about += f"; grouped matmul {kernel_label(meta['grouped_matmul'])}"
    if meta.get("wall_ms_per_step"):
        about += f"; the loop's clock: {_ms(meta['wall_ms_per_step'])} ms per step"
    console.print(about)
    table = Table(title=f"time per step: {_ms(summary.step_ms)} ms")
    table.add_column("category")
    table.add_column("ms / step", justify="right")
    table.add_column("share", justify="right")
    for name, ms in summary.categories.items():
        share = ms / summary.step_ms * 100 if summary.step_ms > 0 else 0.0
        table.add_row(name, _ms(ms), f"{share:.1f}%")
    console.print(table)
    ops = Table(title="top operations")
    ops.add_column("operation")
    ops.add_column("category")
    ops.add_column("calls / step", justify="right")
    ops.add_column("ms / step", justify="right")
    for op in summary.top_ops:
        ops.add_row(op["name"], op["category"], f"{op['calls']:g}", _ms(op["ms"]))
    console.print(ops)


def render_comparison(result: dict[str, Any], console: Console) -> None:
    """Print the per-category change between two profiles."""
    table = Table(
        title="change per step",
        caption=f"before: {result['before']}\nafter:  {result['after']}",
    )
    for column in ("category", "before ms", "after ms", "change ms", "change"):
        table.add_column(column, justify="left" if column == "category" else "right")
    for row in result["rows"]:
        pct = row["change_pct"]
        table.add_row(
            row["category"],
            _ms(row["before_ms"]),
            _ms(row["after_ms"]),
            f"{row['change_ms']:+,.3f}",
            "new" if pct is None else f"{pct:+.1f}%",
        )
    console.print(table)
