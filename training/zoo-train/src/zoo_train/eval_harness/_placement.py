"""Host rows onto the mesh: rows split over the batch's mesh axes, each process placing the part
its devices hold (every process computes the same rows, so any process can cut its part)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh

from ..parallel import BatchLayout, batch_shards


class RowPlacer:
    """Places batches of host rows on ``mesh`` under the sharding ``rules``."""

    def __init__(self, mesh: Mesh, rules: Mapping[str, Any]) -> None:
        self.mesh = mesh
        self.rules = rules
        #: Rows of every batch are a multiple of this: each shard of the batch as many rows.
        self.shards = batch_shards(mesh, rules)
        self._layouts: dict[int, BatchLayout] = {}

    def place(self, batch: dict[str, np.ndarray]) -> dict[str, jax.Array]:
        """Global arrays of ``batch`` (entries ``[R, ...]``, ``R`` a multiple of
        :attr:`shards`), rows split over the devices."""
        rows = next(iter(batch.values())).shape[0]
        layout = self._layouts.get(rows)
        if layout is None:
            layout = self._layouts[rows] = BatchLayout(self.mesh, self.rules, rows)
        return layout.place(layout.local_part(batch))
