"""A run's output directory: held by one training process, and left as it was by a command
that is refused before it trains."""

from __future__ import annotations

import contextlib
import pathlib
import shutil
from collections.abc import Iterator

from ..checkpoint import CHECKPOINT_DIR, run_lock
from ..parallel import is_primary


def _first_missing(path: pathlib.Path) -> pathlib.Path | None:
    """The outermost directory of ``path`` that does not exist yet (``None``: it exists)."""
    missing = None
    for candidate in (path, *path.parents):
        if candidate.exists():
            break
        missing = candidate
    return missing


def _trained(out: pathlib.Path) -> bool:
    from ..loop import METRICS_FILE

    checkpoints = out / CHECKPOINT_DIR
    return (out / METRICS_FILE).exists() or (checkpoints.is_dir() and any(checkpoints.iterdir()))


@contextlib.contextmanager
def output_directory(out: pathlib.Path) -> Iterator[None]:
    """Hold ``out``'s run lock (process 0) for the block. If the block fails before the run
    wrote any metrics or checkpoint (a refused command: bad data, a template error, a mesh
    that does not fit), the directories it created for ``out`` are removed again, so a refusal
    leaves nothing behind."""
    created = _first_missing(out.resolve())
    with run_lock(out, enabled=is_primary()):
        try:
            yield
        except BaseException:
            if created is not None and is_primary() and not _trained(out):
                shutil.rmtree(created, ignore_errors=True)
            raise
