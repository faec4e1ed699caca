"""Print the commit of a package release: its tag if present, else the last commit at that version.

Usage: python scripts/release_commit.py DIRECTORY VERSION    e.g. kernels/flash-tpu 0.1.0

Tags follow `<distribution>-v<version>` (e.g. `zoo-flash-tpu-v0.1.0`). Without the tag (a clone
that did not fetch tags), the release is the newest commit whose `DIRECTORY/pyproject.toml`
carries that version: the state of the package right before the next version bump.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _git(*args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout


def _field(text: str, name: str) -> str | None:
    match = re.search(rf'^{name}\s*=\s*"([^"]+)"', text, re.MULTILINE)
    return match.group(1) if match else None


def release_commit(directory: str, version: str) -> str:
    """The commit of ``directory``'s package at ``version``; raises LookupError if none."""
    pyproject = f"{directory}/pyproject.toml"
    tag = f"{distribution(directory)}-v{version}"
    tags = _git("tag", "--list", tag).split()
    if tags:
        return _git("rev-list", "-n", "1", tag).strip()
    for commit in _git("log", "--format=%H", "--", directory).split():
        try:
            text = _git("show", f"{commit}:{pyproject}")
        except subprocess.CalledProcessError:
            continue
        if _field(text, "version") == version:
            return commit
    raise LookupError(f"no commit of {directory} at version {version} in this repository's history")


def released_versions(directory: str) -> list[str]:
    """Every version ``directory``'s package carried in a commit, newest first."""
    pyproject = f"{directory}/pyproject.toml"
    seen: list[str] = []
    for commit in _git("log", "--format=%H", "--", pyproject).split():
        version = _field(_git("show", f"{commit}:{pyproject}"), "version")
        if version and version not in seen:
            seen.append(version)
    return seen


def distribution(directory: str) -> str:
    """The distribution name in ``directory``'s ``pyproject.toml``."""
    name = _field((ROOT / directory / "pyproject.toml").read_text(), "name")
    if name is None:
        raise LookupError(f"{directory}/pyproject.toml names no distribution")
    return name


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    print(release_commit(sys.argv[1], sys.argv[2]))
