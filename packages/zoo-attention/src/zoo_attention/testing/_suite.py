"""The pytest conformance suite a kernel package runs against itself in one line::

from zoo_attention.testing import ConformanceSuite

class TestConformance(ConformanceSuite):
    implementation = "my_kernel"
"""

from __future__ import annotations

from typing import ClassVar

import pytest

from .._api import dot_product_attention
from ._bad_inputs import BadInput, bad_inputs
from ._cases import CASES, ConformanceCase
from ._check import named_scope_failures, run_case


class ConformanceSuite:
    """Forward, gradients, empty rows, named scope and argument errors for one kernel."""

    implementation: ClassVar[str]

    @pytest.mark.parametrize("case", CASES, ids=str)
    def test_matches_float64_reference(self, case: ConformanceCase) -> None:
        failures = run_case(self.implementation, case)
        assert not failures, "\n".join(failures)

    def test_named_scope_in_hlo(self) -> None:
        failures = named_scope_failures(self.implementation)
        assert not failures, "\n".join(failures)

    @pytest.mark.parametrize("bad", bad_inputs(), ids=str)
    def test_rejects_bad_input(self, bad: BadInput) -> None:
        kwargs = {"implementation": self.implementation, **bad.kwargs}
        with pytest.raises(ValueError, match=bad.expect):
            dot_product_attention(*bad.args, **kwargs)
