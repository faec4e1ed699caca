"""zoo_attention.grouped.testing: the grouped-matmul conformance suite and its float64 reference.

A grouped-matmul kernel package checks itself with::

    from zoo_attention.grouped.testing import ConformanceSuite

    class TestGroupedConformance(ConformanceSuite):
        implementation = "my_kernel"

Fresh random inputs and group sizes each run (``ZOO_TEST_SEED`` replays a failure), the
output and the gradients w.r.t. ``lhs`` and ``rhs`` against float64 numpy, groups that receive
no rows and rows past the groups (exactly zero, with zero gradients). Only
``ConformanceSuite`` needs pytest; ``run_case``, the cases and ``verify(name)`` need numpy and
jax alone.
"""

from typing import Any

from ._bad_inputs import bad_inputs as bad_inputs
from ._cases import CASES as CASES
from ._cases import TOLERANCES as TOLERANCES
from ._cases import GroupedCase as GroupedCase
from ._cases import draw_group_sizes as draw_group_sizes
from ._check import GroupedInputs as GroupedInputs
from ._check import make_inputs as make_inputs
from ._check import named_scope_failures as named_scope_failures
from ._check import run_case as run_case
from ._reference import GroupedReference as GroupedReference
from ._reference import reference_grouped_matmul as reference_grouped_matmul
from ._verify import verify as verify
from ._verify import verify_count as verify_count


def __getattr__(name: str) -> Any:
    if name == "ConformanceSuite":
        from ._suite import ConformanceSuite

        return ConformanceSuite
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "CASES",
    "TOLERANCES",
    "ConformanceSuite",
    "GroupedCase",
    "GroupedInputs",
    "GroupedReference",
    "bad_inputs",
    "draw_group_sizes",
    "make_inputs",
    "named_scope_failures",
    "reference_grouped_matmul",
    "run_case",
    "verify",
    "verify_count",
]
