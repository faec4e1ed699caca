"""lm-eval's chatter kept out of redirected logs: its progress bars and the ``fatal: not a
git repository`` of the ``git describe`` it runs, on the process's standard error."""

from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
from collections.abc import Iterator

# A tqdm bar (`37%|███▋      | 3/8 [00:01<00:02, 2.1it/s]`) or its closing line, and git's
# complaint about a directory outside a repository.
_CHATTER = re.compile(r"\d+%\|.*\||\d+it \[|it/s\]|s/it\]|^fatal: not a git repository")


def keep(line: str) -> bool:
    """Whether a line lm-eval's run wrote to standard error is kept (not a progress bar or
    git's ``fatal: not a git repository``)."""
    return not _CHATTER.search(line)


@contextlib.contextmanager
def quiet_when_redirected() -> Iterator[None]:
    """Standard error, when it is not a terminal, gathered while the block runs and written
    back without progress bars and git's complaint (lm-eval's warnings and anything else
    stay, in order). On a terminal nothing changes."""
    # The process's descriptor 2, which lm-eval's subprocesses inherit (sys.stderr may be
    # another stream over it, or a capture without one).
    fd = 2
    if os.isatty(fd):
        yield
        return
    stream = sys.stderr
    stream.flush()
    saved = os.dup(fd)
    with tempfile.TemporaryFile() as held:
        os.dup2(held.fileno(), fd)
        # Python's writers (tqdm's bars, lm-eval's log) take sys.stderr when they start.
        text_stream = open(held.fileno(), "w", closefd=False, errors="replace")  # noqa: SIM115
        try:
            with contextlib.redirect_stderr(text_stream):
                yield
        finally:
            text_stream.close()
            stream.flush()
            os.dup2(saved, fd)
            os.close(saved)
            held.seek(0)
            text = held.read().decode(errors="replace")
            lines = [ln for part in text.split("\n") for ln in part.split("\r")]
            kept = [ln for ln in lines if ln.strip() and keep(ln)]
            if kept:
                stream.write("\n".join(kept) + "\n")
                stream.flush()
