"""The release table, ``releases.toml``: every release of every zoo package and its sources.

One TOML table per distribution; each release is one line ``"X.Y.Z" = "TREE"``, where TREE is
git's id of the package directory's tree at the release. A tree id names the released files
themselves, so it is true in any clone, with or without tags, and survives rebases and merges
that leave the package's files alone. RELEASING.md explains the choice.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TABLE = "releases.toml"

#: Every package directory, in dependency order.
PACKAGE_DIRS = (
    "packages/zoo-attention",
    "kernels/flash-tpu",
    "kernels/chunked",
    "kernels/splash",
    "kernels/megablox",
    "kernels/deltanet-tpu",
    "kernels/tokamax",
    "packages/zoo-layers",
    "data/zoo-data",
    "models/zoo-models",
    "training/zoo-train",
)

_HEADER = """\
# Every release of every zoo package: "VERSION" = "TREE", where TREE is git's id of the
# package directory at the release (`git rev-parse COMMIT:DIRECTORY`). Written by
# `python scripts/release.py cut DIRECTORY`; checked by tests/test_releases.py. See RELEASING.md.
"""


def field(text: str, name: str) -> str | None:
    """The string value of a top-level ``name = "..."`` line of a ``pyproject.toml``."""
    match = re.search(rf'^{name}\s*=\s*"([^"]+)"', text, re.MULTILINE)
    return match.group(1) if match else None


def distribution(directory: str, root: Path = ROOT) -> str:
    """The distribution name in ``directory``'s ``pyproject.toml``."""
    name = field((root / directory / "pyproject.toml").read_text(), "name")
    if name is None:
        raise LookupError(f"{directory}/pyproject.toml names no distribution")
    return name


def read_table(root: Path = ROOT) -> dict[str, dict[str, str]]:
    """``{distribution: {version: tree}}`` from ``releases.toml`` (empty if there is none)."""
    path = root / TABLE
    if not path.exists():
        return {}
    return tomllib.loads(path.read_text())


def package_releases(directory: str, root: Path = ROOT) -> dict[str, str]:
    """``{version: tree}`` of ``directory``'s package, in the table's (release) order."""
    return read_table(root).get(distribution(directory, root), {})


def record(root: Path, dist: str, version: str, tree: str) -> None:
    """Write ``"version" = "tree"`` into ``dist``'s table (replacing that version's line)."""
    path = root / TABLE
    text = path.read_text() if path.exists() else _HEADER
    line = f'"{version}" = "{tree}"'
    section = re.search(rf"^\[{re.escape(dist)}\]\n((?:[^\[\n].*\n|\n)*)", text, re.MULTILINE)
    if section is None:
        text = text.rstrip("\n") + f"\n\n[{dist}]\n{line}\n"
    else:
        body = section.group(1)
        old = re.search(rf'^"{re.escape(version)}"\s*=.*\n', body, re.MULTILINE)
        if old is not None:
            body = body[: old.start()] + line + "\n" + body[old.end() :]
        else:
            kept = body.rstrip("\n")
            body = kept + "\n" + line + body[len(kept) :] if kept else line + "\n" + body
        text = text[: section.start(1)] + body + text[section.end(1) :]
    path.write_text(text)
