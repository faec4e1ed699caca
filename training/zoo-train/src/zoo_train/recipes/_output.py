"""A run's output directory: held by one training process, and left as it was by a command
that is refused before it trains."""

from __future__ import annotations

import contextlib
import pathlib
from collections.abc import Iterator

from ..checkpoint import run_lock
from ..parallel import is_primary
from ._steps import run_started


@contextlib.contextmanager
def output_directory(out: pathlib.Path) -> Iterator[None]:
    """Hold ``out``'s run lock (process 0) for the block. If the block fails before the run
    wrote any metrics or checkpoint (a refused command: bad data, a template error, a mesh
    that does not fit), what it added to ``out`` is removed again, and so are the lock file
    and the directories taking the lock created: a refusal leaves nothing behind."""
    with run_lock(out, enabled=is_primary(), started=run_started):
        yield
