"""The partial directory a prepare writes into (``.NAME.partial`` beside the store): its lock,
its progress file, emptying it, discarding a refused prepare's, and publishing the finished store
in one rename."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import pathlib
import shutil
from collections.abc import Iterator
from typing import Any

from ._format import sync_dir

#: The partial directory's record of its finished shards, which a rerun continues after.
PROGRESS = "progress.json"


@contextlib.contextmanager
def locked(partial: pathlib.Path, out: pathlib.Path) -> Iterator[None]:
    """Hold the partial directory's lock (made if need be) while the block runs.

    Raises:
        ValueError: another prepare holds it.
    """
    partial.mkdir(parents=True, exist_ok=True)
    with open(partial / "lock", "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ValueError(
                f"Another prepare is writing {str(out)!r}; wait for it to finish."
            ) from None
        yield


def missing(directory: pathlib.Path) -> list[pathlib.Path]:
    """``directory`` and those above it that do not exist yet, deepest first."""
    out = []
    while not directory.exists() and directory != directory.parent:
        out.append(directory)
        directory = directory.parent
    return out


def discard(partial: pathlib.Path, made: list[pathlib.Path]) -> None:
    """After a failed prepare: the partial directory, when it holds nothing a rerun could
    continue from (no finished shard), and the directories made for it, so that a refused
    prepare (an unreadable file, bad JSON) leaves nothing behind."""
    if (partial / PROGRESS).exists():
        return
    shutil.rmtree(partial, ignore_errors=True)
    for directory in made:
        try:
            directory.rmdir()
        except OSError:  # something else was put there meanwhile
            return


def read_progress(partial: pathlib.Path) -> dict[str, Any] | None:
    """The progress an interrupted prepare recorded, or ``None`` (none, or unreadable)."""
    try:
        return json.loads((partial / PROGRESS).read_text())
    except (OSError, ValueError):
        return None


def clear(partial: pathlib.Path) -> None:
    """Empty the partial directory (its lock file stays)."""
    for entry in partial.iterdir():
        if entry.name == "lock":
            continue
        if entry.is_dir():
            shutil.rmtree(entry)
        else:
            entry.unlink()


def publish(partial: pathlib.Path, out: pathlib.Path) -> None:
    """Rename the finished partial directory to ``out`` (replacing what is there)."""
    (partial / PROGRESS).unlink(missing_ok=True)
    (partial / "lock").unlink(missing_ok=True)
    old = out.with_name(f".{out.name}.old")
    if old.exists():
        shutil.rmtree(old)
    if out.exists():
        os.replace(out, old) if out.is_dir() else out.unlink()
    os.replace(partial, out)
    sync_dir(out.parent)
    if old.exists():
        shutil.rmtree(old)
