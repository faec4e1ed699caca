"""Build every released version of every zoo package from this repository's history.

Usage: python scripts/wheelhouse.py [--out wheelhouse] [--package DIR ...] [--list]

One wheel per package version goes into ``wheelhouse/`` (``make wheelhouse``), so a user's
pin installs offline: ``pip install --find-links wheelhouse zoo-flash-tpu==0.1.1``. A version
is released when a commit carries it in the package's ``pyproject.toml``; its wheel is built
from :func:`release_commit.release_commit` (the tag, or the newest commit at that version).
A wheel already in the wheelhouse is kept when it was built from the same commit (recorded in
``wheelhouse/commits.txt``), so a second run builds only what changed.
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

from release_commit import ROOT, distribution, release_commit, released_versions

#: Every package directory, in dependency order.
PACKAGE_DIRS = (
    "packages/zoo-attention",
    "kernels/flash-tpu",
    "kernels/chunked",
    "packages/zoo-layers",
    "models/zoo-models",
    "training/zoo-train",
)


#: Which commit each wheel in the wheelhouse was built from (pip ignores the file).
COMMITS = "commits.txt"


@dataclasses.dataclass(frozen=True)
class Release:
    """One package version and the commit its wheel is built from."""

    directory: str
    distribution: str
    version: str
    commit: str

    @property
    def wheel_name(self) -> str:
        """The file name pip gives this release's (pure Python) wheel."""
        return f"{self.distribution.replace('-', '_')}-{self.version}-py3-none-any.whl"


def releases(directories: tuple[str, ...] = PACKAGE_DIRS) -> list[Release]:
    """Every release of the given packages, each with its commit."""
    out = []
    for directory in directories:
        dist = distribution(directory)
        for version in released_versions(directory):
            out.append(Release(directory, dist, version, release_commit(directory, version)))
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


def build(release: Release, out: Path) -> Path:
    """Build ``release``'s wheel into ``out`` from its commit (no dependencies, no isolation)."""
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="zoo-wheelhouse-") as tmp:
        archive = Path(tmp) / "src.tar"
        with archive.open("wb") as f:
            subprocess.run(
                ["git", "archive", release.commit, release.directory],
                cwd=ROOT,
                stdout=f,
                check=True,
            )
        with tarfile.open(archive) as tar:
            tar.extractall(Path(tmp) / "src", filter="data")
        pip_wheel(Path(tmp) / "src" / release.directory, out)
    wheel = out / release.wheel_name
    if not wheel.exists():
        raise RuntimeError(f"building {release.distribution} {release.version} left no {wheel}")
    return wheel


def _read_commits(path: Path) -> dict[str, str]:
    if not path.exists():
        return {}
    pairs = (line.split() for line in path.read_text().splitlines() if line.strip())
    return {name: commit for name, commit in pairs}


def _write_commits(path: Path, built: dict[str, str]) -> None:
    path.write_text("".join(f"{name} {commit}\n" for name, commit in sorted(built.items())))


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
    record = args.out / COMMITS
    built = _read_commits(record)
    for release in todo:
        wheel = args.out / release.wheel_name
        fresh = wheel.exists() and built.get(wheel.name) == release.commit
        if not fresh:
            wheel.unlink(missing_ok=True)
            build(release, args.out)
            built[wheel.name] = release.commit
            _write_commits(record, built)
        print(f"{'kept' if fresh else 'built':5}  {wheel.name}  (commit {release.commit[:12]})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
