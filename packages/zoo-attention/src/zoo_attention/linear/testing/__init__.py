"""zoo_attention.linear.testing: the linear-attention conformance suite and its float64
reference.

A linear-attention kernel package checks itself with::

    from zoo_attention.linear.testing import ConformanceSuite

    class TestLinearConformance(ConformanceSuite):
        implementation = "my_kernel"

Fresh random inputs each run (``ZOO_TEST_SEED`` replays a failure): the output, the final
state and the gradients w.r.t. query, key, value, log decay, beta and initial state against a
float64 numpy recurrence whose backward pass is written out by hand, on lengths that are not
multiples of the chunk, packed documents, initial states, grouped heads, float32 and bfloat16.
Only ``ConformanceSuite`` needs pytest; ``run_case``, the cases and ``verify(name)`` need numpy
and jax alone.
"""

from typing import Any

from ._bad_inputs import bad_inputs as bad_inputs
from ._cases import CASES as CASES
from ._cases import TOLERANCES as TOLERANCES
from ._cases import LinearCase as LinearCase
from ._cases import draw_segment_ids as draw_segment_ids
from ._check import INPUTS as INPUTS
from ._check import LinearInputs as LinearInputs
from ._check import call_case as call_case
from ._check import make_inputs as make_inputs
from ._check import named_scope_failures as named_scope_failures
from ._check import run_case as run_case
from ._reference import LinearReference as LinearReference
from ._reference import reference_gated_delta_rule as reference_gated_delta_rule
from ._verify import verify as verify
from ._verify import verify_count as verify_count


def __getattr__(name: str) -> Any:
    if name == "ConformanceSuite":
        from ._suite import ConformanceSuite

        return ConformanceSuite
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "CASES",
    "INPUTS",
    "TOLERANCES",
    "ConformanceSuite",
    "LinearCase",
    "LinearInputs",
    "LinearReference",
    "bad_inputs",
    "call_case",
    "draw_segment_ids",
    "make_inputs",
    "named_scope_failures",
    "reference_gated_delta_rule",
    "run_case",
    "verify",
    "verify_count",
]
