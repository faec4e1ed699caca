"""``zoo profile``: where the time of profiled train steps went, and how it changed."""

from __future__ import annotations

import argparse
import json
import sys

from ._usage import UsageError


def cmd_profile(args: argparse.Namespace) -> int:
    from rich.console import Console

    from .profile import compare, render_comparison, render_summary, summarize

    if (args.source is None) == (args.compare is None):
        raise UsageError("Give one trace to read, or --compare BEFORE AFTER.")
    try:
        if args.compare is not None:
            before, after = (summarize(p, top=args.top) for p in args.compare)
            result = compare(before, after)
            if args.json:
                print(json.dumps(result, indent=1))
            else:
                render_comparison(result, Console())
            return 0
        summary = summarize(args.source, top=args.top)
    except (FileNotFoundError, ValueError) as err:
        raise UsageError.from_error(err) from None
    if args.json:
        json.dump(summary.to_json(), sys.stdout, indent=1)
        print()
    else:
        render_summary(summary, Console())
    return 0
