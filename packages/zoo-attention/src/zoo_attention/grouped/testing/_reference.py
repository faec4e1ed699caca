"""Float64 numpy grouped matmul with hand-written gradients: the independent reference."""

from __future__ import annotations

import dataclasses

import numpy as np


@dataclasses.dataclass(frozen=True)
class GroupedReference:
    """Output and, when a cotangent was given, the gradients (all float64)."""

    out: np.ndarray  # [M, N]
    dlhs: np.ndarray | None = None  # [M, K]
    drhs: np.ndarray | None = None  # [G, K, N]


def reference_grouped_matmul(
    lhs: np.ndarray,
    rhs: np.ndarray,
    group_sizes: np.ndarray,
    cotangent: np.ndarray | None = None,
) -> GroupedReference:
    """``out[r] = lhs[r] @ rhs[g]`` for the rows ``r`` of group ``g`` (consecutive ranges of
    ``group_sizes`` rows), zero past them; with ``cotangent [M, N]``, the gradients
    ``dlhs[r] = cotangent[r] @ rhs[g].T`` and ``drhs[g] = lhs[rows of g].T @ cotangent[rows of
    g]`` (zero for the rows past the groups and for empty groups)."""
    a, b = np.asarray(lhs, np.float64), np.asarray(rhs, np.float64)
    out = np.zeros((a.shape[0], b.shape[2]))
    dlhs, drhs = np.zeros_like(a), np.zeros_like(b)
    do = None if cotangent is None else np.asarray(cotangent, np.float64)
    start = 0
    for g, size in enumerate(np.asarray(group_sizes, np.int64)):
        rows = slice(start, start + int(size))
        out[rows] = a[rows] @ b[g]
        if do is not None:
            dlhs[rows] = do[rows] @ b[g].T
            drhs[g] = a[rows].T @ do[rows]
        start += int(size)
    if do is None:
        return GroupedReference(out)
    return GroupedReference(out, dlhs, drhs)
