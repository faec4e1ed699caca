"""The change between two profiles, category by category."""

from __future__ import annotations

from typing import Any

from ._summary import ATTENTION, KERNEL_KINDS, Summary

ATTENTION_TOTAL = "attention (all kernels)"


def _total(kind: str) -> str:
    return f"{kind} (all kernels)"


def _with_totals(categories: dict[str, float]) -> dict[str, float]:
    # A kernel upgrade renames its row (`flash_tpu 0.1.1` → `0.2.0`): the totals compare them.
    # Attention's is always there; a kind's other than attention only where it has rows.
    out = dict(categories)
    for kind in KERNEL_KINDS:
        rows = [v for k, v in categories.items() if k.startswith(f"{kind}:")]
        if rows or kind == ATTENTION:
            out[_total(kind)] = sum(rows)
    return out


def _order(name: str) -> tuple[int, bool, str]:
    """Each kind's total, then its kernels, attention first; then the other categories."""
    for i, kind in enumerate(KERNEL_KINDS):
        if name.startswith(kind):
            return i, name != _total(kind), name
    return len(KERNEL_KINDS), True, name


def compare(before: Summary, after: Summary) -> dict[str, Any]:
    """Per category (and per step): ms per step before and after, the change in ms and in %.

    Returns:
        ``{"before": source, "after": source, "rows": [{"category", "before_ms", "after_ms",
        "change_ms", "change_pct"}, ...]}``, the step row first.
    """
    a, b = _with_totals(before.categories), _with_totals(after.categories)
    names = sorted(dict.fromkeys([*a, *b]), key=_order)
    rows = [("step", before.step_ms, after.step_ms)]
    rows += [(n, a.get(n, 0.0), b.get(n, 0.0)) for n in names]
    return {
        "before": before.source,
        "after": after.source,
        "rows": [
            {
                "category": name,
                "before_ms": x,
                "after_ms": y,
                "change_ms": y - x,
                "change_pct": (y - x) / x * 100 if x > 0 else None,
            }
            for name, x, y in rows
        ],
    }
