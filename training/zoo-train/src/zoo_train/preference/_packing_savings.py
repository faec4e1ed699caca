"""What packing pairs saves: the padding of packed rows against one pair per row."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from zoo_data.store import RowLayout


@dataclasses.dataclass(frozen=True)
class PackingReport:
    """Pairs, rows and padding of packed layouts against one pair per row.

    Attributes:
        pairs: pairs laid out (those longer than a row are not).
        rows: packed rows.
        width: tokens per row (``seq_len + 1``).
        tokens: tokens of the pairs.
    """

    pairs: int
    rows: int
    width: int
    tokens: int

    @property
    def padding(self) -> float:
        """The share of the packed rows' tokens that is padding."""
        return 1.0 - self.tokens / max(self.rows * self.width, 1)

    @property
    def padding_one_per_row(self) -> float:
        """The same with one pair per row."""
        return 1.0 - self.tokens / max(self.pairs * self.width, 1)

    def sentence(self) -> str:
        """``"120 pairs packed into 31 rows of 129 tokens: 12.0% padding (one pair per row:
        77.4%, 3.9x the rows)"``."""
        return (
            f"{self.pairs:,} pairs packed into {self.rows:,} rows of {self.width} tokens: "
            f"{self.padding:.1%} padding (one pair per row: {self.padding_one_per_row:.1%}, "
            f"{self.pairs / max(self.rows, 1):.1f}x the rows)"
        )


def packing_report(layouts: Sequence[RowLayout]) -> PackingReport:
    """The :class:`PackingReport` of pair layouts together."""
    pairs = rows = tokens = 0
    width = 0
    for lay in layouts:
        width = lay.seq_len + 1
        rows += lay.rows
        if lay.lengths is not None:
            tokens += int(np.sum(lay.lengths))
        _, count = lay.documents(np.arange(lay.rows))
        pairs += int(np.sum(count))
    return PackingReport(pairs, rows, width, tokens)
