"""Print the commit of a package release, found from ``releases.toml`` and history alone.

Usage: python scripts/release_commit.py DIRECTORY VERSION    e.g. kernels/flash-tpu 0.1.1

``releases.toml`` records each release as the tree of its package directory; the release
commit is the first commit (parents before children) at which the directory is that tree, the
commit that made those files. Tags are not consulted, so a clone with tags and one without
(only branch ``main`` travels) give the same answer.
"""

from __future__ import annotations

import functools
import subprocess
import sys
from pathlib import Path

from packaging.version import Version
from release_table import ROOT, distribution, field, package_releases


def git(root: Path, *args: str) -> str:
    """``git ARGS`` in ``root``; its standard output."""
    return subprocess.run(
        ["git", *args], cwd=root, capture_output=True, text=True, check=True
    ).stdout


def _history(root: Path, path: str) -> list[str]:
    """Commits that changed ``path``, reachable from HEAD, parents before children."""
    return git(
        root, "log", "--full-history", "--topo-order", "--reverse", "--format=%H", "--", path
    ).split()


@functools.cache
def _first_commits(root: Path, directory: str, head: str) -> dict[str, str]:
    commits = _history(root, directory)
    trees = (
        git(root, "rev-parse", *(f"{c}:{directory}" for c in commits)).split() if commits else []
    )
    first: dict[str, str] = {}
    for commit, tree in zip(commits, trees, strict=True):
        first.setdefault(tree, commit)
    return first


def first_commits(directory: str, root: Path = ROOT) -> dict[str, str]:
    """``{tree: commit}``: every tree ``directory`` had, with the first commit that had it."""
    return _first_commits(root, directory, git(root, "rev-parse", "HEAD").strip())


def version_commits(directory: str, root: Path = ROOT) -> dict[str, str]:
    """``{version: commit}``: every version ``directory``'s ``pyproject.toml`` carried in a
    commit, with the first commit that carried it (the version bump)."""
    pyproject = f"{directory}/pyproject.toml"
    out: dict[str, str] = {}
    for commit in _history(root, pyproject):
        try:
            version = field(git(root, "show", f"{commit}:{pyproject}"), "version")
        except subprocess.CalledProcessError:  # the file was deleted in this commit
            continue
        if version is not None:
            out.setdefault(version, commit)
    return out


def release_commit(directory: str, version: str, root: Path = ROOT) -> str:
    """The commit of ``directory``'s package at release ``version``; LookupError if none."""
    releases = package_releases(directory, root)
    if version not in releases:
        raise LookupError(
            f"{distribution(directory, root)} {version} is not a release in releases.toml"
        )
    commit = first_commits(directory, root).get(releases[version])
    if commit is None:
        raise LookupError(
            f"releases.toml gives {distribution(directory, root)} {version} the tree "
            f"{releases[version][:12]}, which {directory} has at no commit of this history"
        )
    return commit


def released_versions(directory: str, root: Path = ROOT) -> list[str]:
    """Every release of ``directory``'s package in ``releases.toml``, oldest first."""
    return sorted(package_releases(directory, root), key=Version)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    try:
        print(release_commit(sys.argv[1], sys.argv[2]))
    except LookupError as err:
        sys.exit(f"release_commit: {err}")
