"""The pytest conformance suite a linear-attention kernel package runs against itself in one
line::

from zoo_attention.linear.testing import ConformanceSuite

class TestLinearConformance(ConformanceSuite):
    implementation = "my_kernel"
"""

from __future__ import annotations

from ...testing import conformance_suite
from .._api import gated_delta_rule
from ._bad_inputs import bad_inputs
from ._cases import CASES
from ._check import named_scope_failures, run_case

ConformanceSuite = conformance_suite(
    "Forward, final state, gradients w.r.t. every input, packed documents, initial states, the "
    "named scope and the argument errors, for one linear-attention kernel.",
    CASES,
    run_case,
    named_scope_failures,
    bad_inputs(),
    gated_delta_rule,
)
