"""Keep this tree's zoo packages installed editable in the environment that runs this script.

Usage: python scripts/editable.py DIR ...   (every ``make`` target that uses an environment)

A pin installed into the development environment by hand (``pip install zoo-flash-tpu==0.1.1``)
replaces the editable package with a wheel, and ``make test`` would then test the wheel instead
of the tree. Each package of a DIR that is missing, installed from elsewhere or at another
version than its ``pyproject.toml`` says is installed editable again (its dependencies are
already there), and the replacement is named.
"""

from __future__ import annotations

import importlib.metadata
import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from release_table import ROOT, distribution, field


def installed_from(name: str) -> tuple[str | None, str | None]:
    """``(version, where)`` of distribution ``name`` here: ``where`` is the directory of an
    editable install (a ``file:`` URL), else ``None`` (a wheel, or not installed)."""
    try:
        dist = importlib.metadata.distribution(name)
    except importlib.metadata.PackageNotFoundError:
        return None, None
    try:
        direct = json.loads(dist.read_text("direct_url.json") or "{}")
    except ValueError:
        direct = {}
    editable = bool((direct.get("dir_info") or {}).get("editable"))
    return dist.version, direct.get("url") if editable else None


def stale(directories: list[str], root: Path = ROOT) -> list[tuple[str, str]]:
    """``(directory, what is there instead)`` for each package not installed editable from its
    directory at the version its ``pyproject.toml`` names."""
    out = []
    for directory in directories:
        name = distribution(directory, root)
        want = field((root / directory / "pyproject.toml").read_text(), "version")
        version, where = installed_from(name)
        if version is None:
            out.append((directory, f"{name} is not installed"))
        elif where != (root / directory).resolve().as_uri():
            out.append((directory, f"{name} {version} is installed from a wheel, not the tree"))
        elif version != want:
            out.append((directory, f"{name} {version} is installed, the tree is {want}"))
    return out


def main(argv: list[str]) -> int:
    found = stale(argv)
    if not found:
        return 0
    for _, what in found:
        print(f"make: {what}; installing the tree's package (editable) again", file=sys.stderr)
    cmd = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q", "install"]
    cmd += ["-c", str(ROOT / "constraints.txt"), "--no-build-isolation", "--no-deps"]
    for directory, _ in found:
        cmd += ["-e", str(ROOT / directory)]
    return subprocess.call(cmd)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
