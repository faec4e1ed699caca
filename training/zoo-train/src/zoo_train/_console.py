"""Where the command's lines go: a terminal gets a live progress bar, a file or a pipe gets
plain lines (a bar's frames are carriage returns, which a log file keeps as noise)."""

from __future__ import annotations

import sys
from typing import TextIO

#: The prefix of every status line a ``zoo`` command prints.
PREFIX = "zoo: "


def is_terminal(stream: TextIO | None = None) -> bool:
    """Whether ``stream`` (default: the current ``sys.stderr``) is a terminal."""
    stream = sys.stderr if stream is None else stream
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False
