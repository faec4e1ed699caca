"""``zoo profile``: where the time of profiled train steps went, and how it changed."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from rich.console import Console

from .._usage import UsageError
from ..settings import bounded


def add_profile_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("source", nargs="?", metavar="RUN_OR_TRACE", help="run or trace directory")
    p.add_argument(
        "--compare", nargs=2, metavar=("BEFORE", "AFTER"), help="two runs or traces to compare"
    )
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    p.add_argument(
        "--top",
        type=bounded(int, "[1, inf)"),
        default=10,
        metavar="N",
        help="operations listed (default: 10)",
    )


def run_profile(args: argparse.Namespace) -> int:
    # The profile package loads JAX: not on the `zoo profile --help` path.
    from ..profile import compare, render_comparison, render_summary, summarize

    if (args.source is None) == (args.compare is None):
        raise UsageError("Give one trace to read, or --compare BEFORE AFTER.")
    try:
        if args.compare is not None:
            before, after = (summarize(p, top=args.top) for p in args.compare)
            result = compare(before, after)
            if args.json:
                print(json.dumps(result, indent=1))
            else:
                render_comparison(result, _console(Console))
            return 0
        summary = summarize(args.source, top=args.top)
    except (FileNotFoundError, ValueError) as err:
        raise UsageError.from_error(err) from None
    if args.json:
        json.dump(summary.to_json(), sys.stdout, indent=1)
        print()
    else:
        render_summary(summary, _console(Console))
    return 0


def _console(console: type) -> Any:
    """A console as wide as the terminal; piped, one that never cuts a name short (rich would
    fit the tables to 80 columns)."""
    return console() if sys.stdout.isatty() else console(width=10_000)
