"""Find the interpreter for the newest-JAX test leg: a CPython >= 3.12 (jax 0.11 and later
need it).

Prints the interpreter's path and exits 0, or prints nothing and exits 1 with the reason on
stderr. Candidates are tried by running them, not by name: pyenv's ``python3.12`` shim is on
PATH and fails unless a version is selected. Order: ``$ZOO_NEWEST_PYTHON`` (used alone when
set), then ``python3.12`` and ``python3.13`` on PATH, then pyenv's installed 3.12.x and 3.13.x
(newest patch first).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

#: The Python minors the newest-JAX leg may use, preferred first (3.12 is the tested one).
MINORS = ((3, 12), (3, 13))
_PROBE = "import sys; print(*sys.version_info[:2], sep='.')"


def _minor(path: str) -> tuple[int, int] | None:
    """The ``(major, minor)`` that ``path`` reports when run, or ``None`` if it does not run."""
    try:
        out = subprocess.run(
            [path, "-c", _PROBE], capture_output=True, text=True, timeout=30, check=True
        ).stdout
        major, minor = out.strip().split(".")
        return int(major), int(minor)
    except (OSError, subprocess.SubprocessError, ValueError):
        return None


def _pyenv_versions() -> list[Path]:
    root = os.environ.get("PYENV_ROOT") or str(Path.home() / ".pyenv")
    if shutil.which("pyenv"):
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            root = subprocess.run(
                ["pyenv", "root"], capture_output=True, text=True, timeout=30, check=True
            ).stdout.strip()
    versions = Path(root) / "versions"
    if not versions.is_dir():
        return []

    def key(p: Path) -> tuple[int, ...]:
        return tuple(int(x) for x in p.name.split(".") if x.isdigit())

    found = [p for p in versions.iterdir() if p.name[:1].isdigit()]
    return [p / "bin" / "python3" for p in sorted(found, key=key, reverse=True)]


def candidates() -> list[str]:
    """Paths to try, in order."""
    chosen = os.environ.get("ZOO_NEWEST_PYTHON")
    if chosen:
        return [chosen]
    on_path = [shutil.which(f"python{a}.{b}") for a, b in MINORS]
    out = [p for p in on_path if p]
    for minor in MINORS:
        out += [
            str(p)
            for p in _pyenv_versions()
            if p.parent.parent.name.startswith(f"{minor[0]}.{minor[1]}.")
        ]
    return out


def find() -> str | None:
    """The first candidate that runs and is one of :data:`MINORS`."""
    for path in candidates():
        if _minor(path) in MINORS:
            return path
    return None


def interpreter(minor: tuple[int, int]) -> str | None:
    """A Python of ``minor`` that runs here: ``pythonX.Y`` or ``python3`` on PATH, else
    pyenv's newest installed ``X.Y.*`` (``$ZOO_NEWEST_PYTHON`` plays no part)."""
    on_path = [shutil.which(f"python{minor[0]}.{minor[1]}"), shutil.which("python3")]
    pyenv = [
        str(p)
        for p in _pyenv_versions()
        if p.parent.parent.name.startswith(f"{minor[0]}.{minor[1]}.")
    ]
    for path in [p for p in on_path if p] + pyenv:
        if _minor(path) == minor:
            return path
    return None


def main() -> int:
    found = find()
    if found is None:
        wanted = " or ".join(f"{a}.{b}" for a, b in MINORS)
        print(
            f"no Python {wanted} found (tried $ZOO_NEWEST_PYTHON, python3.12 and python3.13 on "
            "PATH, and pyenv's installed versions)",
            file=sys.stderr,
        )
        return 1
    print(found)
    return 0


if __name__ == "__main__":
    sys.exit(main())
