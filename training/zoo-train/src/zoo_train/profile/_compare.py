"""The change between two profiles, category by category."""

from __future__ import annotations

from typing import Any

from ._summary import ATTENTION, Summary

ATTENTION_TOTAL = "attention (all kernels)"


def _with_total(categories: dict[str, float]) -> dict[str, float]:
    # A kernel upgrade renames its row (`flash_tpu 0.1.1` → `0.2.0`): the total compares them.
    total = sum(v for k, v in categories.items() if k.startswith(ATTENTION))
    return {**categories, ATTENTION_TOTAL: total}


def compare(before: Summary, after: Summary) -> dict[str, Any]:
    """Per category (and per step): ms per step before and after, the change in ms and in %.

    Returns:
        ``{"before": source, "after": source, "rows": [{"category", "before_ms", "after_ms",
        "change_ms", "change_pct"}, ...]}``, the step row first.
    """
    a, b = _with_total(before.categories), _with_total(after.categories)
    names = list(dict.fromkeys([*a, *b]))
    names.sort(key=lambda n: (not n.startswith(ATTENTION), n != ATTENTION_TOTAL, n))
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
