"""``main``: the entry point of the ``zoo`` console script."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Sequence
from typing import Any

from .._console import PREFIX
from .._malloc import cap_malloc_arenas
from ._exit import run_command
from ._multiprocess import after_crash, leave_processes
from ._parser import build_parser


class _Stderr(logging.StreamHandler):
    """Writes to whatever ``sys.stderr`` is when a record comes (as Python's last-resort
    handler does), so a redirected or captured stderr gets the lines; through ``tqdm.write``,
    so a line never lands inside a progress bar's frame."""

    @property
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, _: Any) -> None:
        pass

    def emit(self, record: logging.LogRecord) -> None:
        # tqdm takes a third of a second to import: only once a record is logged.
        from tqdm.auto import tqdm

        try:
            tqdm.write(self.format(record), file=sys.stderr)
        except Exception:  # as StreamHandler.emit: a failed line is logging's to report
            self.handleError(record)


def _log_lines() -> logging.Handler | None:
    """Log records as ``zoo: message`` on stderr, the prefix of every status line of the
    command (whichever package logged it); the handler added for the command, if one was
    (removed when it ends, so a program calling ``main`` keeps its own logging). Importing
    Orbax may already have given the root logger absl's handler, in Python's default format
    (``WARNING:zoo_train:…``): that one gets this format instead of a second handler printing
    every line twice; a stream handler of another format is the caller's, left as it is."""
    line = logging.Formatter(PREFIX + "%(message)s")
    plain = [h for h in logging.root.handlers if type(h) is logging.StreamHandler]
    for handler in plain:
        if handler.formatter is None or handler.formatter._fmt == logging.BASIC_FORMAT:
            handler.setFormatter(line)
    if plain:
        return None
    added = _Stderr()
    added.setFormatter(line)
    logging.root.addHandler(added)
    return added


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``zoo`` console script; returns the exit code (see
    :mod:`zoo_train.cli._exit` for what each one means)."""
    cap_malloc_arenas()  # before any thread allocates: flat host memory over long runs
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(argv)  # the arguments of the command named only: imports only it
    args, extra = parser.parse_known_args(argv)
    if extra:  # reported by the command's own parser, so the hint names its --help
        args._commands[args.command].error(f"unrecognized arguments: {' '.join(extra)}")
    handler = _log_lines()
    # Orbax logs through absl, warning on every save without an eval metric, and logs each
    # failed write with its traceback from every thread it passed through: the error this
    # command reports says it in one sentence (ZOO_DEBUG=1 shows them).
    logging.getLogger("absl").setLevel(logging.ERROR if os.environ.get("ZOO_DEBUG") else 100)
    try:
        code = run_command(args.command, lambda: args._command.run(args))
    except BaseException:
        after_crash()
        raise
    finally:
        if handler is not None:  # the command's, not the calling program's
            logging.root.removeHandler(handler)
    leave_processes(code)
    return code
