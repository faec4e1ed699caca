"""The release rules, checked over the working tree and its history (tests/test_releases.py).

- Every version a package's ``pyproject.toml`` carried in a commit, other than development
  versions, is a release in ``releases.toml``, and its recorded tree is the package directory
  at the commit that first carried that version.
- A package's released code is its ``pyproject.toml`` and everything under its ``src/``. At a
  release version those are exactly the release's; once they differ, the package carries a
  development version above its latest release (``X.Y.(Z+1).devN``) with an ``## Unreleased``
  CHANGELOG entry, until the next release. README, CHANGELOG and tests may change freely.
- ``__version__`` agrees with ``pyproject.toml``.
- A tag ``<distribution>-v<version>``, where there is one, names a commit with the release's tree.

Each problem is one sentence naming the package and what to do.
"""

from __future__ import annotations

from pathlib import Path

from package_version import dunder_version, unreleased_notes, version_of
from packaging.version import InvalidVersion, Version
from release_commit import first_commits, git, version_commits
from release_table import PACKAGE_DIRS, ROOT, distribution, package_releases

_DEV = "python scripts/release.py dev"
_RECORD = "python scripts/release.py record"


def released_code(directory: str) -> list[str]:
    """The paths whose content is a package's released code."""
    return [f"{directory}/pyproject.toml", f"{directory}/src"]


def changed_since(commit: str, directory: str, root: Path = ROOT) -> list[str]:
    """Released code of ``directory`` in the working tree that differs from ``commit``'s
    (tracked changes and new untracked files), relative to ``directory``."""
    paths = released_code(directory)
    changed = git(root, "diff", "--name-only", commit, "--", *paths).split()
    changed += git(root, "ls-files", "--others", "--exclude-standard", "--", *paths).split()
    return sorted({p.removeprefix(f"{directory}/") for p in changed})


def _table_problems(directory: str, dist: str, root: Path) -> list[str]:
    recorded = package_releases(directory, root)
    trees = first_commits(directory, root)
    carried = version_commits(directory, root)
    problems = []
    for version, commit in carried.items():
        if Version(version).is_devrelease:
            continue
        tree = git(root, "rev-parse", f"{commit}:{directory}").strip()
        if version not in recorded:
            problems.append(
                f"{dist} {version} was released at {commit[:12]} but is not in releases.toml; "
                f"run `{_RECORD} {directory} {version}`."
            )
        elif recorded[version] != tree:
            problems.append(
                f"releases.toml gives {dist} {version} the tree {recorded[version][:12]}, but "
                f"{directory} was {tree[:12]} at the commit that released it ({commit[:12]}); "
                f"run `{_RECORD} {directory} {version}`."
            )
    pending = version_of(root / directory)  # a release cut but not yet committed
    for version in recorded:
        if version not in carried and version != pending:
            problems.append(
                f"releases.toml lists {dist} {version}, which {directory}/pyproject.toml never "
                "carried in this history; remove that line."
            )
    for tag in git(root, "tag", "--list", f"{dist}-v*").split():
        version = tag.removeprefix(f"{dist}-v")
        tree = git(root, "rev-parse", f"{tag}^{{commit}}:{directory}").strip()
        if version in recorded and recorded[version] != tree:
            problems.append(
                f"tag {tag} names {directory} as {tree[:12]}, not the release's "
                f"{recorded[version][:12]} (commit {trees.get(recorded[version], '?')[:12]}); "
                f"move or delete the tag."
            )
    return problems


def _version_problems(directory: str, dist: str, root: Path) -> list[str]:
    package = root / directory
    version = version_of(package)
    problems = []
    if dunder_version(package) not in (None, version):
        problems.append(
            f"{dist}: __version__ is {dunder_version(package)!r} but pyproject.toml says "
            f"{version}; make them agree."
        )
    try:
        parsed = Version(version)
    except InvalidVersion:
        return [*problems, f"{dist}: version {version!r} is not a PEP 440 version; fix it."]
    recorded = package_releases(directory, root)
    latest = max(recorded, key=Version, default=None)
    if parsed.is_devrelease:
        if latest is not None and parsed <= Version(latest):
            problems.append(
                f"{dist} {version} is not above its latest release {latest}; run "
                f"`{_DEV} {directory}`."
            )
        if not unreleased_notes(package):
            problems.append(
                f"{dist} {version} is a development version with no '## Unreleased' entry in "
                f"{directory}/CHANGELOG.md; describe the change there."
            )
        return problems
    if version not in recorded:
        return [
            *problems,
            f"{dist} {version} is not a release in releases.toml; cut it with `python "
            f"scripts/release.py cut {directory}` or make it a development version with "
            f"`{_DEV} {directory}`.",
        ]
    commit = first_commits(directory, root).get(recorded[version])
    if commit is None:  # not committed yet, or reported by the table check
        return problems
    changed = changed_since(commit, directory, root)
    if changed:
        problems.append(
            f"{dist}'s released code changed since its release {version} "
            f"({', '.join(changed)}); run `{_DEV} {directory}` and describe the change under "
            f"'## Unreleased' in its CHANGELOG.md."
        )
    return problems


def problems(root: Path = ROOT, directories: tuple[str, ...] = PACKAGE_DIRS) -> list[str]:
    """Every breach of the release rules in ``root``'s working tree and history."""
    out = []
    for directory in directories:
        dist = distribution(directory, root)
        out += _table_problems(directory, dist, root)
        out += _version_problems(directory, dist, root)
    return out
