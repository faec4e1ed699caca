"""zoo_attention.testing: the conformance suite and the float64 reference.

A kernel package checks itself with::

    from zoo_attention.testing import ConformanceSuite

    class TestConformance(ConformanceSuite):
        implementation = "my_kernel"

Only ``ConformanceSuite`` (and ``conformance_suite``, which builds such a class) needs
pytest, and it is imported on first use: ``run_case``, the case table and ``verify(name)``
(every case as a pass/fail row, what ``zoo-attention verify`` and ``zoo kernels verify`` run)
work with numpy and jax alone. ``check_query_offset`` checks contract 1.2's query offset on a
kernel that serves it (with contract 1.3's sinks and value head dim, when asked).
``refusal(name, case)`` says why a kernel refuses a case (``None``: it serves it): a kernel
package asserts with it which contract 1.3 features it claims. ``fresh_seed``, ``compare``, ``run_checks`` and
``conformance_suite`` are shared with the grouped-matmul suite (``zoo_attention.grouped.testing``)
and open to kernel packages' own tests.
"""

from typing import Any

from ._bad_inputs import BadInput as BadInput
from ._bad_inputs import bad_inputs as bad_inputs
from ._cases import CASES as CASES
from ._cases import TOLERANCES as TOLERANCES
from ._cases import ConformanceCase as ConformanceCase
from ._check import SEED_VAR as SEED_VAR
from ._check import compare as compare
from ._check import fresh_seed as fresh_seed
from ._check import make_inputs as make_inputs
from ._check import named_scope_failures as named_scope_failures
from ._check import refusal as refusal
from ._check import run_case as run_case
from ._check import tiled as tiled
from ._offset import OFFSET_MASKS as OFFSET_MASKS
from ._offset import check_query_offset as check_query_offset
from ._reference import ReferenceResult as ReferenceResult
from ._reference import reference_attention as reference_attention
from ._reference import reference_mask as reference_mask
from ._verify import run_checks as run_checks
from ._verify import verifier as verifier
from ._verify import verify as verify
from ._verify import verify_count as verify_count


def __getattr__(name: str) -> Any:
    if name in ("ConformanceSuite", "conformance_suite"):
        from . import _suite

        return getattr(_suite, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "CASES",
    "OFFSET_MASKS",
    "SEED_VAR",
    "TOLERANCES",
    "BadInput",
    "ConformanceCase",
    "ConformanceSuite",
    "ReferenceResult",
    "bad_inputs",
    "check_query_offset",
    "compare",
    "conformance_suite",
    "fresh_seed",
    "make_inputs",
    "named_scope_failures",
    "reference_attention",
    "reference_mask",
    "refusal",
    "run_case",
    "run_checks",
    "tiled",
    "verifier",
    "verify",
    "verify_count",
]
