"""Run the conformance cases against an installed kernel, outside pytest, one result a check.

What ``zoo-attention verify NAME`` and ``zoo kernels verify NAME`` run: numpy and jax only.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

from . import _check
from ._cases import ConformanceCase


def _cases() -> tuple[ConformanceCase, ...]:
    """The cases as ``zoo_attention.testing.CASES`` names them when asked: a caller may narrow
    that tuple (a quick check of a few cases runs the same command on a prefix)."""
    return tuple(sys.modules[__package__].CASES)


def verify_count() -> int:
    """How many checks :func:`verify` runs: every conformance case and the named-scope check."""
    return len(_cases()) + 1


def verify(
    name: str, on_row: Callable[[dict[str, str]], None] | None = None
) -> tuple[list[dict[str, str]], int]:
    """Run every conformance case against kernel ``name``; return the rows and failure count.

    Each row is ``{"case", "result" ("pass"/"FAIL"), "seconds", "detail"}``, the last being
    the named-scope check. ``on_row(row)`` is called as each check finishes (a case takes
    seconds, or many in Pallas interpret mode on a CPU).
    """
    rows, failed = [], 0
    report = on_row or (lambda row: None)
    for case in _cases():
        start = time.perf_counter()
        try:
            failures = _check.run_case(name, case)
        except Exception as err:  # a crash is a failure of the case, reported as such
            failures = [f"[{case.name}] raised {type(err).__name__}: {err}"]
        failed += bool(failures)
        rows.append(
            {
                "case": case.name,
                "result": "FAIL" if failures else "pass",
                "seconds": f"{time.perf_counter() - start:.2f}",
                "detail": failures[0] if failures else "",
            }
        )
        report(rows[-1])
    try:
        scope = _check.named_scope_failures(name)
    except Exception as err:  # a kernel that refuses the probe call has failed the check
        scope = [f"raised {type(err).__name__}: {err}"]
    failed += bool(scope)
    rows.append(
        {
            "case": "named-scope",
            "result": "FAIL" if scope else "pass",
            "seconds": "",
            "detail": "; ".join(scope),
        }
    )
    report(rows[-1])
    return rows, failed
