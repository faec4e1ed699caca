"""The pytest conformance suite a cross-entropy kernel package runs against itself in one
line::

from zoo_attention.cross_entropy.testing import ConformanceSuite

class TestCrossEntropyConformance(ConformanceSuite):
    implementation = "my_kernel"
"""

from __future__ import annotations

from ...testing import conformance_suite
from .._api import linear_cross_entropy
from ._bad_inputs import bad_inputs
from ._cases import CASES
from ._check import named_scope_failures, run_case

ConformanceSuite = conformance_suite(
    "Cross entropy, log Z and the gradients w.r.t. the hidden states and the head against "
    "float64 numpy, tokens that do not count, the named scope and the argument errors, for "
    "one cross-entropy kernel.",
    CASES,
    run_case,
    named_scope_failures,
    bad_inputs(),
    linear_cross_entropy,
)
