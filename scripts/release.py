"""Development versions and releases of a zoo package (see RELEASING.md).

Usage:
  python scripts/release.py dev DIRECTORY [NEXT]      X.Y.Z -> X.Y.(Z+1).dev0 (or NEXT.dev0), once
  python scripts/release.py cut DIRECTORY [VERSION]   release: version, CHANGELOG, releases.toml
  python scripts/release.py record DIRECTORY VERSION  (re)record a committed release's tree
  python scripts/release.py check                     the release rules; exit 1 on a breach

``dev`` is what a change to a package's released code (``pyproject.toml``, ``src/``) needs once
after a release: the version becomes a development version and CHANGELOG.md gets an
``## Unreleased`` heading. Later changes keep that version. ``cut`` turns it into a release and
stages the files; commit them as ``<distribution> X.Y.Z: <summary>``.
"""

from __future__ import annotations

import argparse
import datetime
import sys
from pathlib import Path

from package_version import (
    close_unreleased,
    next_dev,
    open_unreleased,
    set_version,
    unreleased_notes,
    version_of,
)
from packaging.version import InvalidVersion, Version
from release_check import problems
from release_commit import git, released_versions, version_commits
from release_table import PACKAGE_DIRS, ROOT, distribution, record


class ReleaseError(Exception):
    """A request this command refuses; the message says what to change."""


def _latest(directory: str, root: Path) -> str | None:
    versions = released_versions(directory, root)
    return versions[-1] if versions else None


def _parse(text: str) -> Version:
    try:
        return Version(text)
    except InvalidVersion:
        raise ReleaseError(f"{text!r} is not a version; write e.g. 0.8.0.") from None


def dev(directory: str, next_release: str | None = None, root: Path = ROOT) -> str:
    """Give ``directory``'s package a development version; returns it (unchanged if it had one
    and no ``next_release`` is asked for)."""
    package = root / directory
    current = version_of(package)
    latest = _latest(directory, root)
    floor = Version(latest) if latest else Version("0")
    if next_release is not None:
        target = _parse(next_release)
        if target.is_prerelease or target <= floor:
            raise ReleaseError(
                f"the next release must be a final version above {latest}; got {next_release}."
            )
        version = f"{target.base_version}.dev0"
    elif Version(current).is_devrelease and Version(current) > floor:
        version = current
    else:
        version = next_dev(latest or current)
    set_version(package, version)
    open_unreleased(package)
    return version


def cut(directory: str, version: str | None = None, root: Path = ROOT) -> str:
    """Release ``directory``'s package: set the version, date the CHANGELOG entry, record the
    directory's tree in ``releases.toml`` and stage it all. Returns the version."""
    package = root / directory
    dist = distribution(directory, root)
    if git(root, "status", "--porcelain", "--", directory).strip():
        raise ReleaseError(f"{directory} has uncommitted changes; commit or stash them first.")
    current = Version(version_of(package))
    version = version or current.base_version
    latest = _latest(directory, root)
    if _parse(version).is_devrelease:
        raise ReleaseError(f"a release cannot be a development version; got {version}.")
    if latest is not None and Version(version) <= Version(latest):
        raise ReleaseError(f"{dist} {version} is not above its latest release {latest}.")
    if not unreleased_notes(package):
        raise ReleaseError(
            f"{directory}/CHANGELOG.md has no '## Unreleased' entry; describe the release there."
        )
    set_version(package, version)
    close_unreleased(package, version, datetime.date.today())
    git(root, "add", "--", directory)
    tree = git(root, "write-tree", f"--prefix={directory}/").strip()
    record(root, dist, version, tree)
    git(root, "add", "--", "releases.toml")
    return version


def record_release(directory: str, version: str, root: Path = ROOT) -> str:
    """Record in ``releases.toml`` the tree ``directory`` had at the first commit carrying
    ``version`` (after a rebase changed it, or for a release made without ``cut``)."""
    commit = version_commits(directory, root).get(version)
    if commit is None:
        raise ReleaseError(f"no commit of this history gives {directory} version {version}.")
    tree = git(root, "rev-parse", f"{commit}:{directory}").strip()
    record(root, distribution(directory, root), version, tree)
    return tree


def _directory(text: str) -> str:
    directory = text.strip("/")
    if directory not in PACKAGE_DIRS:
        raise argparse.ArgumentTypeError(f"{text!r} is not a package directory: {PACKAGE_DIRS}")
    return directory


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    p = commands.add_parser("dev", help="give a package a development version")
    p.add_argument("directory", type=_directory)
    p.add_argument("next", nargs="?", help="the release it leads to (default: next patch)")
    p = commands.add_parser("cut", help="release a package")
    p.add_argument("directory", type=_directory)
    p.add_argument("version", nargs="?", help="default: the development version's release")
    p = commands.add_parser("record", help="record a committed release's tree")
    p.add_argument("directory", type=_directory)
    p.add_argument("version")
    commands.add_parser("check", help="check the release rules")
    args = parser.parse_args(argv)
    try:
        if args.command == "dev":
            version = dev(args.directory, args.next)
            print(f"{args.directory}: {version}; note the change under '## Unreleased' in "
                  f"{args.directory}/CHANGELOG.md.")  # fmt: skip
        elif args.command == "cut":
            version = cut(args.directory, args.version)
            dist = distribution(args.directory)
            print(f"{dist} {version} staged; commit it: git commit -m '{dist} {version}: ...'")
        elif args.command == "record":
            tree = record_release(args.directory, args.version)
            print(f"releases.toml: {distribution(args.directory)} {args.version} = {tree}")
        else:
            found = problems()
            print("\n".join(found) or "release rules hold")
            return 1 if found else 0
    except ReleaseError as err:
        print(f"release: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
