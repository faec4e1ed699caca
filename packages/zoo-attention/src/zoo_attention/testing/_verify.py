"""Run the conformance cases against an installed kernel, outside pytest, one result a check.

What ``zoo-attention verify NAME`` and ``zoo kernels verify NAME`` run: numpy and jax only.
:func:`run_checks` is the loop, shared with the grouped-matmul suite.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from . import _check
from ._cases import ConformanceCase

Row = dict[str, str]


def _cases() -> tuple[ConformanceCase, ...]:
    """The cases as ``zoo_attention.testing.CASES`` names them when asked: a caller may narrow
    that tuple (a quick check of a few cases runs the same command on a prefix)."""
    return tuple(sys.modules[__package__].CASES)


def verify_count() -> int:
    """How many checks :func:`verify` runs: every conformance case and the named-scope check."""
    return len(_cases()) + 1


def _row(case: str, failures: list[str], seconds: str) -> Row:
    return {
        "case": case,
        "result": "FAIL" if failures else "pass",
        "seconds": seconds,
        "detail": failures[0] if failures else "",
    }


def run_checks(
    cases: Sequence[Any],
    run_case: Callable[[Any], list[str]],
    scope_failures: Callable[[], list[str]],
    on_row: Callable[[Row], None] | None = None,
) -> tuple[list[Row], int]:
    """``run_case(case)`` for each case (each has a ``name``), then ``scope_failures()``: the
    rows (``{"case", "result" ("pass"/"FAIL"), "seconds", "detail"}``, the last being the
    named-scope check) and the failure count. A check that raises has failed.
    ``on_row(row)`` is called as each check finishes."""
    rows, failed = [], 0
    report = on_row or (lambda row: None)
    for case in cases:
        start = time.perf_counter()
        try:
            failures = run_case(case)
        except Exception as err:  # a crash is a failure of the case, reported as such
            failures = [f"[{case.name}] raised {type(err).__name__}: {err}"]
        failed += bool(failures)
        rows.append(_row(case.name, failures, f"{time.perf_counter() - start:.2f}"))
        report(rows[-1])
    try:
        scope = scope_failures()
    except Exception as err:  # a kernel that refuses the probe call has failed the check
        scope = [f"raised {type(err).__name__}: {err}"]
    failed += bool(scope)
    rows.append({**_row("named-scope", scope, ""), "detail": "; ".join(scope)})
    report(rows[-1])
    return rows, failed


def verifier(
    package: str, check: Any
) -> tuple[Callable[..., tuple[list[Row], int]], Callable[[], int]]:
    """``(verify, verify_count)`` for a kind's testing package: its cases as the package's
    ``CASES`` names them when asked, each through ``check.run_case(name, case)``, then
    ``check.named_scope_failures(name)``."""

    def cases() -> tuple[Any, ...]:
        return tuple(sys.modules[package].CASES)

    def count() -> int:
        return len(cases()) + 1

    def run(name: str, on_row: Callable[[Row], None] | None = None) -> tuple[list[Row], int]:
        return run_checks(
            cases(),
            lambda case: check.run_case(name, case),
            lambda: check.named_scope_failures(name),
            on_row,
        )

    return run, count


def verify(name: str, on_row: Callable[[Row], None] | None = None) -> tuple[list[Row], int]:
    """Run every conformance case against kernel ``name``; return the rows and failure count.

    Each row is ``{"case", "result" ("pass"/"FAIL"), "seconds", "detail"}``, the last being
    the named-scope check. ``on_row(row)`` is called as each check finishes (a case takes
    seconds, or many in Pallas interpret mode on a CPU).
    """
    return run_checks(
        _cases(),
        lambda case: _check.run_case(name, case),
        lambda: _check.named_scope_failures(name),
        on_row,
    )
