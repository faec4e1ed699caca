"""The grouped-matmul conformance cases: group-size patterns, dtypes and awkward shapes.

Shapes are small (interpret-mode kernels run them on a CPU) and odd, or straddle 128, so
kernels with tiles of 128 rows or columns see partial tiles and groups that start mid-tile.
The group sizes are drawn afresh each run, by a rule that makes every draw hold what the case
is meant to test (an empty group, rows past the groups).
"""

from __future__ import annotations

import dataclasses
from typing import Literal

import numpy as np

Sizes = Literal["gaps", "full", "none", "one"]


@dataclasses.dataclass(frozen=True)
class GroupedCase:
    """One grouped matmul to check: ``lhs [m, k]``, ``rhs [groups, k, n]``.

    ``sizes``: ``"gaps"`` random sizes with at least one empty group (when there are two or
    more) and at least one row past the groups; ``"full"`` the same with every row in a group;
    ``"none"`` every group empty; ``"one"`` all the rows but the last in one group.
    ``rhs_dtype``: ``rhs``'s dtype when it differs from ``lhs``'s (the contract casts it).
    """

    name: str
    m: int = 96
    k: int = 40
    n: int = 72
    groups: int = 6
    dtype: str = "float32"
    rhs_dtype: str | None = None
    sizes: Sizes = "gaps"

    def __str__(self) -> str:
        return self.name


def draw_group_sizes(case: GroupedCase, rng: np.random.Generator) -> np.ndarray:
    """Group sizes ``[groups]`` (int32) for ``case`` by its rule (see :class:`GroupedCase`)."""
    g, m = case.groups, case.m
    sizes = np.zeros(g, np.int64)
    if case.sizes == "none":
        return sizes.astype(np.int32)
    if case.sizes == "one":
        sizes[rng.integers(g)] = m - 1
        return sizes.astype(np.int32)
    used = m if case.sizes == "full" else int(rng.integers(1, m))
    # Some groups are empty (at least one of two or more); the rest share the rows at random.
    empty = rng.choice(g, size=int(rng.integers(1, g)) if g > 1 else 0, replace=False)
    live = np.setdiff1d(np.arange(g), empty)
    sizes[live] = rng.multinomial(used, np.full(len(live), 1.0 / len(live)))
    return sizes.astype(np.int32)


#: The cases every grouped-matmul kernel must pass.
CASES: tuple[GroupedCase, ...] = (
    GroupedCase("gaps-f32"),
    GroupedCase("full-f32-m130", m=130, k=64, n=128, groups=5, sizes="full"),
    GroupedCase("one-group-rows-past", m=50, k=24, n=40, groups=1),
    GroupedCase("all-groups-empty", m=24, k=16, n=24, groups=4, sizes="none"),
    GroupedCase("all-rows-in-one-group", m=70, k=32, n=48, groups=8, sizes="one"),
    GroupedCase("many-groups-few-rows", m=40, k=16, n=24, groups=16),
    GroupedCase("tall-m300", m=300, k=24, n=40, groups=4),
    GroupedCase("gaps-bf16", m=200, k=128, n=256, groups=8, dtype="bfloat16"),
    GroupedCase("bf16-lhs-f32-rhs", m=64, k=32, n=48, dtype="bfloat16", rhs_dtype="float32"),
)

#: Tolerances per dtype: max |kernel - reference| <= tol * max(1, max |reference|).
TOLERANCES: dict[str, dict[str, float]] = {
    "float32": {"out": 2e-5, "grad": 2e-5},
    "bfloat16": {"out": 2e-2, "grad": 4e-2},
}
