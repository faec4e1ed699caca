"""``main``: the entry point of the ``zoo`` console script."""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence

from .._malloc import cap_malloc_arenas
from ._exit import run_command
from ._parser import build_parser
from ._processes import after_crash, leave_processes


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``zoo`` console script; returns the exit code (see
    :mod:`zoo_train.cli._exit` for what each one means)."""
    cap_malloc_arenas()  # before any thread allocates: flat host memory over long runs
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:  # reported by the command's own parser, so the hint names its --help
        args._commands[args.command].error(f"unrecognized arguments: {' '.join(extra)}")
    # force: importing Orbax already gave the root logger a handler of the default format.
    logging.basicConfig(level=logging.WARNING, format="%(name)s: %(message)s", force=True)
    # Orbax logs through absl, warning on every save without an eval metric, and logs each
    # failed write with its traceback from every thread it passed through: the error this
    # command reports says it in one sentence (ZOO_DEBUG=1 shows them).
    logging.getLogger("absl").setLevel(logging.ERROR if os.environ.get("ZOO_DEBUG") else 100)
    try:
        code = run_command(args.command, lambda: args._run(args))
    except BaseException:
        after_crash()
        raise
    leave_processes(code)
    return code
