"""Where a command may write: never over, around or into what it reads, never the filesystem
root or a system directory.

Every command that writes a directory or file it was told to (``prepare --out``, ``zoo train
--out``, ``--data-cache``, ``--export-hf``, ``zoo eval --output``, ``zoo compile --json``, ``zoo
convert DST``) checks its output with :func:`check_output_path` before any work, against every
path it reads. Paths are compared resolved (symlinks followed, ``..`` folded), so a link or a
relative spelling does not hide that two paths are one.
"""

from __future__ import annotations

import os
import pathlib
from collections.abc import Iterable
from typing import Literal

#: Directories that hold the system: nothing of a run belongs in or under them.
_SYSTEM_TREES = (
    "/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/proc", "/sbin",
    "/sys", "/usr/bin", "/usr/sbin", "/usr/lib", "/usr/lib32", "/usr/lib64", "/usr/libx32",
    "/usr/libexec", "/usr/include", "/usr/share", "/System",
)  # fmt: skip
#: Directories that hold everyone's directories: writing into one itself scatters a run's files
#: among the system's (a directory of your own inside them is fine: /usr/src/app, /var/tmp/x).
_SHARED_ROOTS = (
    "/home", "/usr", "/usr/local", "/usr/src", "/var", "/opt", "/run", "/mnt",
    "/media", "/srv",
)  # fmt: skip


def _resolved(path: str | os.PathLike[str]) -> pathlib.Path:
    return pathlib.Path(os.path.realpath(os.path.abspath(os.fspath(path))))


def _within(inner: pathlib.Path, outer: pathlib.Path) -> bool:
    return inner != outer and outer in inner.parents


def system_directory(path: str | os.PathLike[str]) -> str | None:
    """How ``path`` (resolved) is a place no command should write: ``"the filesystem root"``,
    ``"a system directory"``; ``None`` when it is an ordinary place."""
    real = _resolved(path)
    if real == real.parent:
        return "the filesystem root"
    for tree in _SYSTEM_TREES:
        top = _resolved(tree)
        if real == top or _within(real, top):
            return "a system directory"
    if any(real == _resolved(root) for root in _SHARED_ROOTS):
        return "a system directory"
    return None


def check_output_path(
    path: str | os.PathLike[str],
    inputs: Iterable[str | os.PathLike[str] | None] = (),
    *,
    flag: str = "--out",
    kind: Literal["directory", "file"] | None = "directory",
    allow_same: bool = False,
    may_hold_inputs: bool = False,
) -> None:
    """Refuse ``path`` as an output: the filesystem root or a system directory; a file where a
    directory is written (or a directory where a file is); one of ``inputs``, a directory that
    contains one, or a path inside one.

    Args:
        path: the output, as the user gave it.
        inputs: every path the command reads (``None`` entries are skipped; missing paths are
            compared too: a glob's matches are given instead of the glob).
        flag: how the user named the output, for the sentence (``--out``, ``--output``).
        kind: what is written there (``None``: not checked, for a caller that checks again
            once it knows every input).
        allow_same: the output may be an input itself (an export that replaces its source on
            purpose, written beside it and swapped in); containing or lying inside one is still
            refused.
        may_hold_inputs: the output is a directory the command only adds to (a run's
            directory: checkpoints, metrics), never replaces or empties, so it may hold an
            input (a reward file kept with the run); being one or lying inside one is still
            refused.

    Raises:
        ValueError: one sentence naming the output, the input and what to change.
    """
    shown = os.fspath(path)
    where = system_directory(path)
    if where is not None:
        raise ValueError(
            f"{flag} {shown!r} is {where}; write into a directory of your own instead."
        )
    real = _resolved(path)
    for source in inputs:
        if source is None:
            continue
        read = _resolved(source)
        named = os.fspath(source)
        if real == read and not allow_same:
            relation = "is"
        elif _within(read, real) and not may_hold_inputs:
            relation = "contains"
        elif _within(real, read):
            relation = "lies inside"
        else:
            continue
        raise ValueError(
            f"{flag} {shown!r} {relation} the input {named!r}: writing there would overwrite it "
            "or mix the output into it; write outside every input."
        )
    target = pathlib.Path(path)
    if kind == "directory" and target.exists() and not target.is_dir():
        raise ValueError(f"{flag} {shown!r} is a file; pass a directory.")
    if kind == "file" and target.is_dir():
        raise ValueError(f"{flag} {shown!r} is a directory; pass the path of a file to write.")
