"""zoo_attention.cross_entropy.testing: the cross-entropy conformance suite and its float64
reference.

A cross-entropy kernel package checks itself with::

    from zoo_attention.cross_entropy.testing import ConformanceSuite

    class TestCrossEntropyConformance(ConformanceSuite):
        implementation = "my_kernel"

Fresh random inputs each run (``ZOO_TEST_SEED`` replays a failure): ``ce``, ``log_z`` and the
gradients w.r.t. the hidden states and the head against float64 numpy, over vocabularies no
tile divides (up to Gemma's 262,208), masked tokens whose targets are -100, a z-loss
cotangent, the final logit soft cap, float32 and bfloat16 hidden states and both head layouts.
A case the kernel's ``check`` refuses (a feature it declares it lacks) is not run, since such
calls fall back to another kernel (:func:`refusal` says why).
Only ``ConformanceSuite`` needs pytest; ``run_case``, the cases and ``verify(name)`` need
numpy and jax alone.
"""

from typing import Any

from ._bad_inputs import bad_inputs as bad_inputs
from ._cases import CASES as CASES
from ._cases import TOLERANCES as TOLERANCES
from ._cases import CrossEntropyCase as CrossEntropyCase
from ._check import IGNORED_TARGET as IGNORED_TARGET
from ._check import CrossEntropyInputs as CrossEntropyInputs
from ._check import make_inputs as make_inputs
from ._check import named_scope_failures as named_scope_failures
from ._check import refusal as refusal
from ._check import run_case as run_case
from ._reference import CrossEntropyReference as CrossEntropyReference
from ._reference import reference_cross_entropy as reference_cross_entropy
from ._verify import verify as verify
from ._verify import verify_count as verify_count


def __getattr__(name: str) -> Any:
    if name == "ConformanceSuite":
        from ._suite import ConformanceSuite

        return ConformanceSuite
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "CASES",
    "IGNORED_TARGET",
    "TOLERANCES",
    "ConformanceSuite",
    "CrossEntropyCase",
    "CrossEntropyInputs",
    "CrossEntropyReference",
    "bad_inputs",
    "make_inputs",
    "named_scope_failures",
    "reference_cross_entropy",
    "refusal",
    "run_case",
    "verify",
    "verify_count",
]
