"""Build every released version of every zoo package from this repository's history.

Usage: python scripts/wheelhouse.py [--out wheelhouse] [--package DIR ...] [--list]

One wheel per package version goes into ``wheelhouse/`` (``make wheelhouse``), so a user's
pin installs offline: ``pip install --find-links wheelhouse zoo-flash-tpu==0.1.1``. The
releases are those of ``releases.toml``; each wheel is built from the package directory's tree
recorded there, which is the directory at its release commit
(:func:`release_commit.release_commit`), with or without tags. A wheel already in the
wheelhouse is kept when it was built from the same tree (recorded in ``wheelhouse/trees.txt``),
so a second run builds only what changed.
"""

from __future__ import annotations

import argparse
import dataclasses
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from release_commit import release_commit, released_versions
from release_table import PACKAGE_DIRS, ROOT, distribution, package_releases

#: Which tree each wheel in the wheelhouse was built from (pip ignores the file).
TREES = "trees.txt"


@dataclasses.dataclass(frozen=True)
class Release:
    """One package release: the tree of its directory its wheel is built from, and the commit
    that made that tree."""

    directory: str
    distribution: str
    version: str
    tree: str
    commit: str

    @property
    def wheel_name(self) -> str:
        """The file name pip gives this release's (pure Python) wheel."""
        return f"{self.distribution.replace('-', '_')}-{self.version}-py3-none-any.whl"


def releases(directories: tuple[str, ...] = PACKAGE_DIRS, root: Path = ROOT) -> list[Release]:
    """Every release of the given packages in ``releases.toml``, each with its tree and commit."""
    out = []
    for directory in directories:
        dist = distribution(directory, root)
        trees = package_releases(directory, root)
        for version in released_versions(directory, root):
            commit = release_commit(directory, version, root)
            out.append(Release(directory, dist, version, trees[version], commit))
    return out


def pip_wheel(source: Path, out: Path) -> None:
    """``pip wheel`` one package directory into ``out`` (no dependencies, no isolated build)."""
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--disable-pip-version-check",
            "-q",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(out),
            str(source),
        ],
        check=True,
        capture_output=True,
        text=True,
    )


def build(release: Release, out: Path, root: Path = ROOT) -> Path:
    """Build ``release``'s wheel into ``out`` from its tree (no dependencies, no isolation)."""
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="zoo-wheelhouse-") as tmp:
        archive = Path(tmp) / "src.tar"
        with archive.open("wb") as f:
            subprocess.run(["git", "archive", release.tree], cwd=root, stdout=f, check=True)
        with tarfile.open(archive) as tar:
            tar.extractall(Path(tmp) / "src", filter="data")
        pip_wheel(Path(tmp) / "src", out)
    wheel = out / release.wheel_name
    if not wheel.exists():
        raise RuntimeError(f"building {release.distribution} {release.version} left no {wheel}")
    return wheel


def _read_trees(path: Path) -> dict[str, str]:
    if not path.exists():
        return {}
    pairs = (line.split() for line in path.read_text().splitlines() if line.strip())
    return {name: tree for name, tree in pairs}


def _write_trees(path: Path, built: dict[str, str]) -> None:
    path.write_text("".join(f"{name} {tree}\n" for name, tree in sorted(built.items())))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "wheelhouse")
    parser.add_argument("--package", action="append", metavar="DIR", help="only these packages")
    parser.add_argument("--list", action="store_true", help="print the releases, build nothing")
    args = parser.parse_args(argv)
    unknown = set(args.package or ()) - set(PACKAGE_DIRS)
    if unknown:
        print(
            f"wheelhouse: unknown package {sorted(unknown)}; known: {PACKAGE_DIRS}", file=sys.stderr
        )
        return 2
    todo = releases(tuple(args.package) if args.package else PACKAGE_DIRS)
    if args.list:
        for release in todo:
            print(f"{release.distribution} {release.version} {release.commit[:12]}")
        return 0
    record = args.out / TREES
    built = _read_trees(record)
    for release in todo:
        wheel = args.out / release.wheel_name
        fresh = wheel.exists() and built.get(wheel.name) == release.tree
        if not fresh:
            wheel.unlink(missing_ok=True)
            build(release, args.out)
            built[wheel.name] = release.tree
            _write_trees(record, built)
        print(f"{'kept' if fresh else 'built':5}  {wheel.name}  (commit {release.commit[:12]})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
