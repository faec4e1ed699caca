"""Plain fixed-width tables, as the command line prints them."""

from __future__ import annotations

from collections.abc import Sequence


def table_lines(head: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """``head``, a rule, then ``rows``: each column as wide as its widest cell."""
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
             for row in [head, *rows]]  # fmt: skip
    lines.insert(1, "  ".join("-" * w for w in widths))
    return lines


def format_table(rows: Sequence[dict[str, str]]) -> str:
    """``rows`` as a table whose header is the first row's keys; ``(none)`` when empty."""
    if not rows:
        return "(none)"
    head = list(rows[0])
    return "\n".join(table_lines(head, [[str(r[c]) for c in head] for r in rows]))
