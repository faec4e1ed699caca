"""Release provenance from the repository alone: releases.toml, release commits, dev versions.

Only branch ``main`` travels (a clone has no tags), so every test that looks up a release
does it in a ``git clone --no-tags`` of this repository. What a release *is* comes from an
independent reading of history: the first commit whose ``pyproject.toml`` carries the version.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import package_version
import pytest
import release
import release_check
import release_commit
import release_table
import wheelhouse
from envs import PACKAGES, ROOT, leg_packages
from packaging.version import Version

#: Releases the no-tags fallback used to build from other commits (issue 26): 0.1.1 from a
#: zoo-chunked release commit, 0.2.0 from a later README commit.
MISBUILT = [("zoo-flash-tpu", "0.1.1"), ("zoo-flash-tpu", "0.2.0")]
CHUNKED = "kernels/chunked"


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


def test_this_tree_keeps_the_release_rules():
    problems = release_check.problems()
    assert not problems, "\n".join(problems)


def test_released_code_changed_without_a_version_change_fails_until_dev_version(tmp_path):
    root = _clone(tmp_path / "clone")
    package = root / CHUNKED
    latest = release_commit.released_versions(CHUNKED, root)[-1]
    _git(root, "checkout", release_commit.release_commit(CHUNKED, latest, root), "--", CHUNKED)
    assert release_check.problems(root, (CHUNKED,)) == []

    # README, CHANGELOG and tests are not released code.
    for name in ("README.md", "CHANGELOG.md", "tests/test_chunked_kernel.py"):
        with (package / name).open("a") as f:
            f.write("\n")
    assert release_check.problems(root, (CHUNKED,)) == []

    module = package_version.init_file(package)
    module.write_text(module.read_text() + "\n# changed after the release\n")
    (problem,) = release_check.problems(root, (CHUNKED,))
    rel = module.relative_to(package).as_posix()
    assert problem == (
        f"zoo-chunked's released code changed since its release {latest} ({rel}); run "
        f"`python scripts/release.py dev {CHUNKED}` and describe the change under "
        "'## Unreleased' in its CHANGELOG.md."
    )

    version = release.dev(CHUNKED, root=root)
    assert Version(version) > Version(latest) and Version(version).is_devrelease
    assert release.dev(CHUNKED, root=root) == version  # a second change keeps it
    assert package_version.dunder_version(package) == version
    (problem,) = release_check.problems(root, (CHUNKED,))
    assert "no '## Unreleased' entry" in problem and "zoo-chunked" in problem
    notes = (
        (package / "CHANGELOG.md")
        .read_text()
        .replace("## Unreleased\n", "## Unreleased\n\n- A comment.\n", 1)
    )
    (package / "CHANGELOG.md").write_text(notes)
    assert release_check.problems(root, (CHUNKED,)) == []

    # The release: cut, commit, and the new release is found from history without a tag.
    _git(root, "commit", "-qam", "zoo-chunked: a comment")
    released = release.cut(CHUNKED, root=root)
    assert released == Version(version).base_version
    _git(root, "commit", "-qm", f"zoo-chunked {released}: a comment")
    head = _git(root, "rev-parse", "HEAD").strip()
    assert release_commit.release_commit(CHUNKED, released, root) == head
    assert release_check.problems(root, (CHUNKED,)) == []
    assert f"## {released} — " in (package / "CHANGELOG.md").read_text()

    # A pyproject.toml change after it is released code changing again.
    pyproject = package / "pyproject.toml"
    text = pyproject.read_text()
    pyproject.write_text(re.sub(r'"jax>=[^"]*"', '"jax>=0.10"', text, count=1))
    assert pyproject.read_text() != text
    (problem,) = release_check.problems(root, (CHUNKED,))
    assert f"since its release {released} (pyproject.toml)" in problem
    after = release.dev(CHUNKED, root=root)
    assert Version(after) > Version(released) and Version(after).is_devrelease


def test_a_table_line_that_is_not_the_release_is_refused(tmp_path):
    root = _clone(tmp_path / "clone")
    tree = _git(root, "rev-parse", f"HEAD:{CHUNKED}").strip()
    table = (root / "releases.toml").read_text()
    first = release_commit.released_versions(CHUNKED, root)[0]
    release_table.record(root, "zoo-chunked", first, tree)
    assert (root / "releases.toml").read_text() != table
    problems = release_check.problems(root, (CHUNKED,))
    assert len(problems) == 1
    assert f"releases.toml gives zoo-chunked {first} the tree {tree[:12]}" in problems[0]
    assert f"python scripts/release.py record {CHUNKED} {first}" in problems[0]
    release.record_release(CHUNKED, first, root)
    assert (root / "releases.toml").read_text() == table


def test_installed_versions_and_zoo_version_show_each_package_version():
    """The environment's zoo packages (editable) report the versions their sources carry,
    development markers included."""
    import importlib.metadata

    shown = subprocess.run(
        [str(Path(sys.executable).parent / "zoo"), "--version"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    for dist, directory in leg_packages().items():
        version = package_version.version_of(ROOT / directory)
        assert importlib.metadata.version(dist) == version, f"{dist}: run make install"
        assert f"{dist} {version}" in shown
