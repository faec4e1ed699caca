"""Small statistics and timing helpers shared by the benchmarks."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence


def median(values: Sequence[float]) -> float:
    """The median of a non-empty sequence."""
    if not values:
        raise ValueError("median of an empty sequence; run at least one timed repeat.")
    return float(statistics.median(values))


def time_calls(fn: Callable[[], object], repeats: int) -> list[float]:
    """Wall-clock seconds of ``repeats`` calls of ``fn`` (which must block until done)."""
    out = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        out.append(time.perf_counter() - start)
    return out


def slope(xs: Sequence[float], ys: Sequence[float]) -> float:
    """Least-squares slope of ``ys`` against ``xs`` (0 when the ``xs`` do not vary)."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    var = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / var if var else 0.0


def gib(nbytes: float | None) -> float | None:
    """Bytes to GiB (``None`` passes through)."""
    return None if nbytes is None else nbytes / 2**30
