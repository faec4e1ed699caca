"""Which source each row of a mixture comes from: a pure function of the row's global index.

Sources are split off one at a time: of the rows left to sources ``k, k+1, …``, source ``k``
takes a share ``p_k = w_k / (w_k + w_{k+1} + …)``, row ``j`` (counted among those rows) going to
it when ``floor((j + 1) * p_k + phase_k)`` steps up. So the first ``G`` rows hold
``w_k * G`` rows of source ``k`` to within one row at every ``G`` (never a run of bad luck),
and the ``r``-th row source ``k`` gets is its ``r``-th row: each source is read in its own
order, each row once per epoch of that source, with no state to carry.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence

import numpy as np


class Mixture:
    """Rows drawn across sources in proportion to ``weights``, deterministically per index."""

    def __init__(self, weights: Sequence[float], *, seed: int = 0) -> None:
        w = [float(x) for x in weights]
        if not w or not all(math.isfinite(x) and x > 0 for x in w):
            raise ValueError(f"Mixture weights must be positive numbers, got {list(weights)}.")
        total = sum(w)
        self.weights = [x / total for x in w]
        left = np.cumsum(self.weights[::-1])[::-1]  # weight of sources k, k+1, …
        self._shares = [min(x / r, 1.0) for x, r in zip(self.weights, left, strict=True)]
        self._phases = [
            int.from_bytes(hashlib.blake2b(f"{seed}:{k}".encode(), digest_size=8).digest(), "big")
            / 2.0**64
            for k in range(len(w))
        ]

    def assign(self, index: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(source, rank)`` of each global row index (int ``[K]``): the source it comes from
        and how many of that source's rows come before it. int64 ``[K]`` each."""
        j = np.asarray(index, np.int64)
        source = np.full(j.shape, len(self.weights) - 1, np.int64)
        rank = j.copy()
        open_ = np.ones(j.shape, bool)
        for k, (share, phase) in enumerate(zip(self._shares[:-1], self._phases, strict=False)):
            jj = rank[open_]
            taken = np.floor(jj * share + phase).astype(np.int64)
            mine = np.floor((jj + 1) * share + phase).astype(np.int64) > taken
            where = np.flatnonzero(open_)
            source[where[mine]] = k
            rank[where] = np.where(mine, taken, jj - taken)
            open_[where[mine]] = False
        return source, rank
