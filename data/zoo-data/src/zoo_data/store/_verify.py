"""Checking a store's files against its manifest: sizes (cheap, at every open) and checksums
(a full read, on request and when a prepare resumes)."""

from __future__ import annotations

import hashlib
import os
import pathlib
from collections.abc import Iterable
from typing import Any

from ._manifest import read_manifest

_BLOCK = 8 << 20


def sha256_file(path: pathlib.Path) -> str:
    """The sha256 of a file, read in blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(_BLOCK):
            digest.update(block)
    return digest.hexdigest()


def file_problem(root: pathlib.Path, record: dict[str, Any], *, checksum: bool) -> str | None:
    """What is wrong with one shard file (missing, another size, another checksum), or ``None``."""
    path = root / record["name"]
    if not path.is_file():
        return f"{record['name']} is missing"
    size = path.stat().st_size
    if size != record["bytes"]:
        return (
            f"{record['name']} has {size} bytes instead of {record['bytes']} (truncated or changed)"
        )
    if checksum and sha256_file(path) != record["sha256"]:
        return f"{record['name']} does not match its checksum (modified)"
    return None


def shard_problems(
    root: pathlib.Path, shards: Iterable[dict[str, Any]], *, checksum: bool
) -> list[str]:
    """Every problem of the shards' files."""
    problems = (file_problem(root, f, checksum=checksum) for s in shards for f in s["files"])
    return [p for p in problems if p is not None]


def check_store(path: str | os.PathLike[str], *, checksums: bool = True) -> dict[str, Any]:
    """Check every shard file of the store at ``path`` against the manifest: its size, and its
    sha256 when ``checksums`` (a read of the whole store). Returns the manifest.

    Raises:
        ValueError: naming the first bad file (and how many are bad).
    """
    manifest = read_manifest(path)
    problems = shard_problems(pathlib.Path(path), manifest["shards"], checksum=checksums)
    if problems:
        more = f" ({len(problems) - 1} more bad file(s))" if len(problems) > 1 else ""
        raise ValueError(
            f"The token store {os.fspath(path)!r} is damaged: {problems[0]}{more}; prepare it "
            "again (`zoo data prepare ... --overwrite`)."
        )
    return manifest
