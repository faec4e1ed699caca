"""An exclusive lock on a run's output directory, held for the life of a training process.

Two training processes writing one directory would interleave their checkpoints and metrics.
The lock is ``fcntl.flock`` on ``<out>/.zoo-run.lock``: the kernel releases it when its holder
ends however it ends (``kill -9`` included), so a lock is never left held by a dead process.
The file records the holder (pid, host, start time) for the refusal message; a record found
on a free lock is one a killed process could not clear, and is reported when taken over.

The file is emptied on release rather than removed: removing it would let a third process lock
a fresh file while a second still holds the old, unlinked one. Locking is reentrant within a
process (the command line and the library's ``train`` both take it). Readers (``zoo eval``,
``generate``, ``convert``) never take it.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import functools
import json
import logging
import os
import pathlib
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, ParamSpec, TypeVar

from .._errors import RunLockedError

logger = logging.getLogger("zoo_train")

LOCK_FILE = ".zoo-run.lock"

_P = ParamSpec("_P")
_R = TypeVar("_R")

# Locks this process holds: resolved directory -> [file descriptor, depth].
_held: dict[str, list[int]] = {}
_guard = threading.Lock()


def _holder_record() -> dict[str, Any]:
    return {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "started": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
    }


def _read_record(fd: int) -> dict[str, Any] | None:
    os.lseek(fd, 0, os.SEEK_SET)
    text = os.read(fd, 4096).decode("utf-8", "replace").strip()
    if not text:
        return None
    try:
        record = json.loads(text)
    except json.JSONDecodeError:
        return {}
    return record if isinstance(record, dict) else {}


def _write_record(fd: int, record: dict[str, Any] | None) -> None:
    os.ftruncate(fd, 0)
    if record is not None:
        os.pwrite(fd, (json.dumps(record) + "\n").encode(), 0)


def _describe(record: dict[str, Any] | None) -> str:
    if not record or "pid" not in record:
        return "another process (its pid and host were not recorded)"
    since = f", started {record['started']}" if record.get("started") else ""
    return f"process {record['pid']} on host {record.get('host', '?')}{since}"


def acquire(directory: str | os.PathLike[str]) -> None:
    """Take the run lock of ``directory`` (created if missing), or raise at once.

    Raises:
        RunLockedError: another process holds it; the message names its pid and host.
    """
    directory = pathlib.Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    key = str(directory.resolve())
    with _guard:
        if key in _held:
            _held[key][1] += 1
            return
        fd = os.open(directory / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _describe(_read_record(fd))
            os.close(fd)
            raise RunLockedError(
                f"{directory} is in use by {holder}, which is training into it; wait for it to "
                "end or choose another output directory."
            ) from None
        except OSError as e:
            if e.errno not in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS):
                os.close(fd)
                raise
            # A filesystem without locks: train unguarded rather than not at all.
            logger.warning("cannot lock %s (%s); nothing stops a second run into it", key, e)
        previous = _read_record(fd)
        if previous is not None:
            logger.warning(
                "took over the lock of %s, left by %s, which ended without releasing it",
                directory,
                _describe(previous),
            )
        _write_record(fd, _holder_record())
        _held[key] = [fd, 1]


def release(directory: str | os.PathLike[str]) -> None:
    """Release one hold of ``directory``'s run lock (the last one unlocks it)."""
    key = str(pathlib.Path(directory).resolve())
    with _guard:
        entry = _held.get(key)
        if entry is None:
            return
        entry[1] -= 1
        if entry[1] > 0:
            return
        del _held[key]
        fd = entry[0]
        with contextlib.suppress(OSError):  # a full or read-only disk: closing still unlocks
            _write_record(fd, None)
        os.close(fd)


@contextlib.contextmanager
def run_lock(directory: str | os.PathLike[str], *, enabled: bool = True) -> Iterator[None]:
    """Hold ``directory``'s run lock for the ``with`` block (``enabled=False``: do nothing, as
    every process but process 0 of a multi-process run does)."""
    if not enabled:
        yield
        return
    acquire(directory)
    try:
        yield
    finally:
        release(directory)


def holds_run_lock(fn: Callable[_P, _R]) -> Callable[_P, _R]:
    """Decorate a function taking an ``out`` keyword: it runs holding ``out``'s run lock, taken
    by process 0 only (one lock per directory however many processes write it)."""

    @functools.wraps(fn)
    def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        from ..parallel import is_primary

        with run_lock(kwargs["out"], enabled=is_primary()):  # type: ignore[arg-type]
            return fn(*args, **kwargs)

    return wrapper
