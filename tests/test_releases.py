"""Release provenance from the repository alone: releases.toml and release commits.

Only branch ``main`` travels (a clone has no tags), so every test that looks up a release
does it in a ``git clone --no-tags`` of this repository. What a release *is* comes from an
independent reading of history: the first commit whose ``pyproject.toml`` carries the version.
"""

from __future__ import annotations

import shutil
import subprocess
import tomllib
import zipfile
from pathlib import Path

import pytest
import release_commit
import wheelhouse
from _envs import PACKAGES, ROOT
from packaging.version import Version

#: Releases the no-tags fallback used to build from other commits (issue 26): 0.1.1 from a
#: zoo-chunked release commit, 0.2.0 from a later README commit.
MISBUILT = [("zoo-flash-tpu", "0.1.1"), ("zoo-flash-tpu", "0.2.0")]


def _git(root: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=zoo", "-c", "user.email=zoo@localhost", *args],
        cwd=root,
        check=True,
        capture_output=True,
        text=True,
    ).stdout


def _clone(into: Path) -> Path:
    """A ``git clone --no-tags`` of this repository, with this checkout's release table."""
    _git(ROOT, "clone", "-q", "--no-tags", str(ROOT), str(into))
    assert not _git(into, "tag").strip()
    shutil.copy(ROOT / "releases.toml", into / "releases.toml")
    return into


def _bump_commits(root: Path) -> dict[tuple[str, str], str]:
    """(distribution, version) → the first commit whose pyproject.toml carries that version,
    for every version that is not a development version."""
    out: dict[tuple[str, str], str] = {}
    for dist, directory in PACKAGES.items():
        path = f"{directory}/pyproject.toml"
        for commit in _git(
            root, "rev-list", "--topo-order", "--reverse", "HEAD", "--", path
        ).split():
            version = tomllib.loads(_git(root, "show", f"{commit}:{path}"))["project"]["version"]
            if not Version(version).is_devrelease:
                out.setdefault((dist, version), commit)
    return out


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _clone(tmp_path_factory.mktemp("releases") / "clone")


@pytest.fixture(scope="module")
def bumps(clone: Path) -> dict[tuple[str, str], str]:
    return _bump_commits(clone)


def _answers(root: Path) -> dict[tuple[str, str], str]:
    return {
        (dist, version): release_commit.release_commit(directory, version, root)
        for dist, directory in PACKAGES.items()
        for version in release_commit.released_versions(directory, root)
    }


def test_release_commit_is_the_same_with_and_without_tags(clone, bumps):
    untagged = _answers(clone)
    assert untagged == bumps
    for (dist, version), commit in bumps.items():  # tags as releases used to be tagged
        _git(clone, "tag", f"{dist}-v{version}", commit)
    try:
        assert _answers(clone) == untagged
    finally:
        _git(clone, "tag", "-d", *(f"{d}-v{v}" for d, v in bumps))
    for dist, version in MISBUILT:
        subject = _git(clone, "log", "-n1", "--format=%s", untagged[dist, version])
        assert subject.startswith(f"{dist} {version}:"), subject


def test_wheelhouse_builds_each_release_from_its_release_commit_without_tags(
    clone, bumps, tmp_path
):
    releases = wheelhouse.releases(root=clone)
    assert {(r.distribution, r.version): r.commit for r in releases} == bumps
    for release_ in (r for r in releases if (r.distribution, r.version) in MISBUILT):
        wheel = wheelhouse.build(release_, tmp_path, root=clone)
        commit = bumps[release_.distribution, release_.version]
        src = f"{release_.directory}/src/"
        expected = _git(clone, "ls-tree", "-r", "--name-only", commit, src).split()
        with zipfile.ZipFile(wheel) as zf:
            code = {n for n in zf.namelist() if ".dist-info/" not in n}
            assert code == {p.removeprefix(src) for p in expected}
            for path in expected:
                shown = subprocess.run(
                    ["git", "show", f"{commit}:{path}"], cwd=clone, capture_output=True, check=True
                ).stdout
                assert zf.read(path.removeprefix(src)) == shown, path
            meta = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
            assert f"\nVersion: {release_.version}\n" in zf.read(meta).decode()
