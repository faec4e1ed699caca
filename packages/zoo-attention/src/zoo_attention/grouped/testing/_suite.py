"""The pytest conformance suite a grouped-matmul kernel package runs against itself in one
line::

from zoo_attention.grouped.testing import ConformanceSuite

class TestGroupedConformance(ConformanceSuite):
    implementation = "my_kernel"
"""

from __future__ import annotations

from ...testing import conformance_suite
from .._api import grouped_matmul
from ._bad_inputs import bad_inputs
from ._cases import CASES
from ._check import named_scope_failures, run_case

ConformanceSuite = conformance_suite(
    "Forward, gradients w.r.t. both operands, empty groups, rows past the groups, the named "
    "scope and the argument errors, for one grouped-matmul kernel.",
    CASES,
    run_case,
    named_scope_failures,
    bad_inputs(),
    grouped_matmul,
)
