"""The grouped-matmul conformance cases against an installed kernel, outside pytest (what
``zoo kernels verify NAME`` runs for a grouped-matmul kernel): numpy and jax only."""

from __future__ import annotations

import sys
from collections.abc import Callable

from ...testing import run_checks
from . import _check
from ._cases import GroupedCase


def _cases() -> tuple[GroupedCase, ...]:
    """The cases as ``zoo_attention.grouped.testing.CASES`` names them when asked."""
    return tuple(sys.modules[__package__].CASES)


def verify_count() -> int:
    """How many checks :func:`verify` runs: every case and the named-scope check."""
    return len(_cases()) + 1


def verify(
    name: str, on_row: Callable[[dict[str, str]], None] | None = None
) -> tuple[list[dict[str, str]], int]:
    """Run every grouped-matmul case against kernel ``name``: the rows (as
    ``zoo_attention.testing.verify`` gives them) and the failure count."""
    return run_checks(
        _cases(),
        lambda case: _check.run_case(name, case),
        lambda: _check.named_scope_failures(name),
        on_row,
    )
