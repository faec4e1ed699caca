"""An exclusive lock on a run's output directory, held for the life of a training process.

Two training processes writing one directory would interleave their checkpoints and metrics.
The lock is ``fcntl.flock`` on ``<out>/.zoo-run.lock``: the kernel releases it when its holder
ends however it ends (``kill -9`` included), so a lock is never left held by a dead process.
The file records the holder (pid, host, start time) for the refusal message; a record found
on a free lock is one a killed process could not clear, and is reported when taken over.

The file is emptied on release rather than removed, with one exception: a run that fails
before it starts (``run_lock(..., started=...)``) removes the directory it created, lock file
included, so a refused command leaves nothing behind. A process that locked a file which was
removed meanwhile notices (the path no longer names the file it holds) and locks the new one.
Locking is reentrant within a process (the command line and the library's ``train`` both take
it). Readers (``zoo eval``, ``generate``, ``convert``) never take it.
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
import shutil
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, ParamSpec, TypeVar

from .._errors import RunLockedError
from ..parallel import is_primary

logger = logging.getLogger("zoo_train")

LOCK_FILE = ".zoo-run.lock"

_P = ParamSpec("_P")
_R = TypeVar("_R")

# Locks this process holds: resolved directory -> [file descriptor, depth].
_held: dict[str, list[int]] = {}
# Locks whose file this process created: resolved directory -> the topmost directory the
# acquire created (None: the directory existed).
_created: dict[str, pathlib.Path | None] = {}
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
    created = next((p for p in reversed((directory, *directory.parents)) if not p.exists()), None)
    directory.mkdir(parents=True, exist_ok=True)
    key = str(directory.resolve())
    with _guard:
        if key in _held:
            _held[key][1] += 1
            return
        fresh = not (directory / LOCK_FILE).exists()
        fd = _lock(directory, key)
        if fresh:
            _created[key] = created
        previous = _read_record(fd)
        if previous is not None:
            logger.warning(
                "took over the lock of %s, left by %s, which ended without releasing it",
                directory,
                _describe(previous),
            )
        _write_record(fd, _holder_record())
        _held[key] = [fd, 1]


def _lock(directory: pathlib.Path, key: str) -> int:
    """A descriptor of ``directory``'s lock file, locked, or raise at once."""
    path = directory / LOCK_FILE
    while True:
        directory.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
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
            return fd
        if _names(path, fd):
            return fd
        os.close(fd)  # the holder before removed the file (a discarded run): lock the new one


def _names(path: pathlib.Path, fd: int) -> bool:
    try:
        here, held = os.stat(path), os.fstat(fd)
    except FileNotFoundError:
        return False
    return (here.st_dev, here.st_ino) == (held.st_dev, held.st_ino)


def release(directory: str | os.PathLike[str], *, discard: bool = False) -> None:
    """Release one hold of ``directory``'s run lock (the last one unlocks it).

    ``discard``: when this is the last hold, the acquire created the lock file and nothing
    else is in ``directory``, remove the file, and the directory and its parents if the acquire
    created them.
    """
    directory = pathlib.Path(directory)
    key = str(directory.resolve())
    with _guard:
        entry = _held.get(key)
        if entry is None:
            return
        entry[1] -= 1
        if entry[1] > 0:
            return
        del _held[key]
        fresh, created = key in _created, _created.pop(key, None)
        fd = entry[0]
        if discard and fresh and os.listdir(directory) == [LOCK_FILE]:
            # Unlinked while still held: a process that opened it meanwhile sees it is gone.
            with contextlib.suppress(OSError):
                os.unlink(directory / LOCK_FILE)
            os.close(fd)
            for level in (directory, *directory.parents) if created is not None else ():
                with contextlib.suppress(OSError):  # not empty (or gone): leave it
                    level.rmdir()
                if level == created:
                    break
            return
        with contextlib.suppress(OSError):  # a full or read-only disk: closing still unlocks
            _write_record(fd, None)
        os.close(fd)


@contextlib.contextmanager
def run_lock(
    directory: str | os.PathLike[str],
    *,
    enabled: bool = True,
    started: Callable[[pathlib.Path], bool] | None = None,
) -> Iterator[None]:
    """Hold ``directory``'s run lock for the ``with`` block (``enabled=False``: do nothing, as
    every process but process 0 of a multi-process run does).

    ``started``: when the block fails and ``started(directory)`` says the run had not begun,
    what the block added to the directory is removed, and so are the lock file and the
    directory if taking the lock created them: a refused run leaves nothing behind.
    """
    if not enabled:
        yield
        return
    directory = pathlib.Path(directory)
    acquire(directory)
    before = set(os.listdir(directory))
    failed = False
    try:
        yield
    except BaseException:
        failed = True
        raise
    finally:
        discard = failed and started is not None and not started(directory)
        if discard:
            for name in set(os.listdir(directory)) - before:
                path = directory / name
                if path.is_dir() and not path.is_symlink():
                    shutil.rmtree(path, ignore_errors=True)
                else:
                    path.unlink(missing_ok=True)
        release(directory, discard=discard)


def holds_run_lock(fn: Callable[_P, _R]) -> Callable[_P, _R]:
    """Decorate a function taking an ``out`` keyword: it runs holding ``out``'s run lock, taken
    by process 0 only (one lock per directory however many processes write it)."""

    @functools.wraps(fn)
    def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        with run_lock(kwargs["out"], enabled=is_primary()):  # type: ignore[arg-type]
            return fn(*args, **kwargs)

    return wrapper
