"""Writing a model directory whole or not at all, and never over one it should not replace.

An export is written into a temporary sibling of its destination and renamed into place, so a
kill mid-export leaves the old directory or the new one, never a mixture. A destination that
is the source model, or a non-empty directory, is refused unless the caller overwrites on
purpose; the old directory is then moved to a sibling first and removed once the new one is in
place (a kill between the two renames leaves it there, named ``.<name>.old-<pid>``).
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import shutil
from collections.abc import Iterator

from ._errors import STORAGE_ERRNOS, CheckpointWriteError
from ._usage import UsageError


def check_export_target(
    dest: str | os.PathLike[str],
    *,
    sources: tuple[str | os.PathLike[str] | None, ...] = (),
    overwrite: bool = False,
    flag: str = "--overwrite",
    named: str = "the export",
    inputs: tuple[str | os.PathLike[str] | None, ...] = (),
) -> None:
    """Refuse, before any work, to write into one of ``sources`` or into a non-empty
    directory, unless ``overwrite``; a file at ``dest``, the filesystem root or a system
    directory, and a ``dest`` that holds or lies inside a source or one of ``inputs`` (or is
    one of ``inputs``) always.

    Raises:
        UsageError: one sentence naming ``dest`` and ``flag``.
    """
    from zoo_data import check_output_path

    dest = pathlib.Path(dest)
    if dest.exists() and not dest.is_dir():
        raise UsageError(f"{str(dest)!r} is a file; the export needs a directory path.")
    try:
        # Replacing the model read is --overwrite's to allow; around or inside it, never.
        check_output_path(dest, sources, flag=named, allow_same=True)
        check_output_path(dest, inputs, flag=named)
    except ValueError as e:
        raise UsageError.from_error(e) from None
    if overwrite:
        return
    for source in sources:
        if source is not None and dest.resolve() == pathlib.Path(source).resolve():
            raise UsageError(
                f"{str(dest)!r} is the model being read; export elsewhere, or pass {flag} to "
                "replace it."
            )
    if dest.is_dir() and any(dest.iterdir()):
        raise UsageError(
            f"{str(dest)!r} exists and is not empty; choose a new destination, or pass {flag} "
            "to replace it."
        )


@contextlib.contextmanager
def atomic_directory(
    dest: str | os.PathLike[str], *, enabled: bool = True
) -> Iterator[pathlib.Path]:
    """Yield a fresh temporary sibling of ``dest`` to write into; when the block succeeds it
    replaces ``dest``, when it fails it is removed and ``dest`` is untouched.

    ``enabled=False`` (the processes of a multi-process run that do not write) yields ``dest``
    itself and does nothing.
    """
    dest = pathlib.Path(dest)
    if not enabled:
        yield dest
        return
    tag = f"{dest.name}.{os.getpid()}"
    tmp, old = dest.with_name(f".{tag}.tmp"), dest.with_name(f".{dest.name}.old-{os.getpid()}")
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(tmp, ignore_errors=True)  # left by an earlier process of this pid
        tmp.mkdir()
        yield tmp
    except (OSError, CheckpointWriteError) as e:
        shutil.rmtree(tmp, ignore_errors=True)
        if e.errno in STORAGE_ERRNOS:  # named as the destination, not the temporary sibling
            raise OSError(e.errno, os.strerror(e.errno), str(dest)) from e
        raise
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if dest.exists():
        os.replace(dest, old)
        os.replace(tmp, dest)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(tmp, dest)
