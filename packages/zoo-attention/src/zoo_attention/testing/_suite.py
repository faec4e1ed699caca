"""The pytest conformance suite a kernel package runs against itself in one line::

from zoo_attention.testing import ConformanceSuite

class TestConformance(ConformanceSuite):
    implementation = "my_kernel"

:func:`conformance_suite` builds such a class from a kind's cases and checks; the
grouped-matmul suite is built by it too.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import pytest

from .._api import dot_product_attention
from ._bad_inputs import BadInput, bad_inputs
from ._cases import CASES
from ._check import named_scope_failures, run_case


def conformance_suite(
    doc: str,
    cases: Sequence[Any],
    check_case: Callable[[str, Any], list[str]],
    scope_failures: Callable[[str], list[str]],
    bad: Sequence[BadInput],
    call: Callable[..., Any],
) -> type:
    """A pytest class whose subclasses set ``implementation`` and check that kernel:
    ``check_case(name, case)`` for every case (a list of failures), ``scope_failures(name)``,
    and ``call(*args, implementation=name, **kwargs)`` raising for every bad input."""

    class Suite:
        implementation: ClassVar[str]

        @pytest.mark.parametrize("case", cases, ids=str)
        def test_matches_float64_reference(self, case: Any) -> None:
            failures = check_case(self.implementation, case)
            assert not failures, "\n".join(failures)

        def test_named_scope_in_hlo(self) -> None:
            failures = scope_failures(self.implementation)
            assert not failures, "\n".join(failures)

        @pytest.mark.parametrize("bad", bad, ids=str)
        def test_rejects_bad_input(self, bad: BadInput) -> None:
            kwargs = {"implementation": self.implementation, **bad.kwargs}
            with pytest.raises(ValueError, match=bad.expect):
                call(*bad.args, **kwargs)

    Suite.__name__ = Suite.__qualname__ = "ConformanceSuite"
    Suite.__doc__ = doc
    return Suite


ConformanceSuite = conformance_suite(
    "Forward, gradients, empty rows, named scope and argument errors for one kernel.",
    CASES,
    run_case,
    named_scope_failures,
    bad_inputs(),
    dot_product_attention,
)
