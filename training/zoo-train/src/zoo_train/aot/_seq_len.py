"""``zoo compile --max-seq-len``: the longest sequence whose train step fits, by compiles.

Lengths are ``1024 * 2**k``: the search doubles from the first length while the step fits and
halves while it does not, so the answer comes with its proof, a length that compiles and fits
and the next power of two that does not (or the limit, or 1024 not fitting).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from ._train_step import StepReport, StepSetup, compile_step

#: The shortest length tried: the answer is a power of two times this.
BASE = 1024


def snap_length(seq_len: int) -> int:
    """The largest ``1024 * 2**k`` at most ``seq_len`` (1024 below it)."""
    length = BASE
    while length * 2 <= seq_len:
        length *= 2
    return length


def max_seq_len(
    setup: StepSetup,
    batch_size: int,
    *,
    start: int,
    limit: int,
    on_compile: Callable[[int], None] | None = None,
    on_report: Callable[[int, StepReport], None] | None = None,
) -> tuple[int, dict[int, StepReport]]:
    """The longest ``1024 * 2**k`` (at most ``limit``) whose step at a global micro-batch of
    ``batch_size`` rows fits, and the compile of each length tried.

    Starts at ``snap_length(start)``; returns 0 when 1024 does not fit. ``on_compile`` hears
    each length before its compile, ``on_report`` each result.
    """
    reports: dict[int, StepReport] = {}
    top = snap_length(limit)

    def fits(length: int) -> bool:
        if on_compile is not None:
            on_compile(length)
        report = compile_step(dataclasses.replace(setup, seq_len=length), batch_size)
        reports[length] = report
        if on_report is not None:
            on_report(length, report)
        return report.fits

    length = min(snap_length(start), top)
    if fits(length):
        while length < top and fits(length * 2):
            length *= 2
        return length, reports
    while length > BASE:
        length //= 2
        if fits(length):
            return length, reports
    return 0, reports
