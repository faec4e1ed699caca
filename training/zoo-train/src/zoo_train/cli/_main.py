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
    _log_format()
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


LOG_FORMAT = "%(name)s: %(message)s"


def _log_format() -> None:
    """Log lines read ``zoo_models: note: …``. absl (imported with Orbax) configures the root
    logger with Python's default ``WARNING:name:message`` format the first time it logs, which
    makes a later ``basicConfig`` do nothing: that handler gets this format instead."""
    root = logging.getLogger()
    if not root.handlers:
        logging.basicConfig(level=logging.WARNING, format=LOG_FORMAT)
        return
    for handler in root.handlers:
        if getattr(handler.formatter, "_fmt", None) in (None, logging.BASIC_FORMAT):
            handler.setFormatter(logging.Formatter(LOG_FORMAT))
