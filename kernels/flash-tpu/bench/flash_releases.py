"""An older zoo release importable beside the installed one, for a worker process.

The release's wheel comes from ``wheelhouse/`` (``make wheelhouse``); when it is not there,
``scripts/wheelhouse.py --package DIR`` builds that package's releases from their release
commits into a scratch directory (a few seconds), as the compatibility-matrix tests build
theirs, and ``wheelhouse/`` is left as it was. The wheel is then installed with ``pip install
--no-deps --target`` into a directory of its own; a worker that puts the directory first on
``PYTHONPATH`` imports the release instead of the editable current version (which the
environment finds through a ``.pth`` path, after ``PYTHONPATH``).
"""

from __future__ import annotations

import importlib.metadata
import pathlib
import subprocess
import sys

from bench.harness import ROOT

WHEELHOUSE = ROOT / "wheelhouse"
BUILD_TIMEOUT_S = 600


def installed_version(distribution: str = "zoo-flash-tpu") -> str:
    """The installed (editable) version of ``distribution``, "installed" when it is not."""
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "installed"


class ReleaseUnavailableError(RuntimeError):
    """The release could not be made importable; the message says why."""


def wheel_name(distribution: str, version: str) -> str:
    """The file name of a pure-Python release wheel (as ``scripts/wheelhouse.py`` names it)."""
    return f"{distribution.replace('-', '_')}-{version}-py3-none-any.whl"


def _tail(proc: subprocess.CompletedProcess[str]) -> str:
    lines = (proc.stderr or proc.stdout or "").strip().splitlines()
    return lines[-1][:300] if lines else f"exit {proc.returncode}"


def release_wheel(
    directory: str, distribution: str, version: str, scratch: pathlib.Path
) -> tuple[pathlib.Path, str]:
    """The wheel of ``distribution==version`` and where it came from.

    From ``wheelhouse/`` when it is there, else built into ``scratch`` by
    ``scripts/wheelhouse.py`` (a ``wheelhouse/`` made here as a side effect would change how
    tools see the tree: ruff then takes ``import wheelhouse`` for first-party code).
    """
    name = wheel_name(distribution, version)
    if (WHEELHOUSE / name).exists():
        return WHEELHOUSE / name, "wheelhouse/"
    built = "built from its release commit by scripts/wheelhouse.py (no wheelhouse/)"
    if (scratch / name).exists():  # an earlier call built the package's releases here
        return scratch / name, built
    cmd = [sys.executable, str(ROOT / "scripts" / "wheelhouse.py"), "--package", directory]
    try:
        proc = subprocess.run(
            [*cmd, "--out", str(scratch)],
            capture_output=True,
            text=True,
            timeout=BUILD_TIMEOUT_S,
            cwd=ROOT,
        )
    except subprocess.TimeoutExpired:
        raise ReleaseUnavailableError(
            f"no {name} in wheelhouse/ and building it took over {BUILD_TIMEOUT_S} s"
        ) from None
    if not (scratch / name).exists():
        raise ReleaseUnavailableError(
            f"no {name} in wheelhouse/ and scripts/wheelhouse.py did not build it: {_tail(proc)}"
        )
    return scratch / name, built


def install_target(wheel: pathlib.Path, into: pathlib.Path, python: pathlib.Path) -> pathlib.Path:
    """``python -m pip install --no-deps --target into wheel``; returns ``into``."""
    proc = subprocess.run(
        [str(python), "-m", "pip", "--disable-pip-version-check", "-q", "install",
         "--no-deps", "--no-index", "--target", str(into), str(wheel)],
        capture_output=True,
        text=True,
    )  # fmt: skip
    if proc.returncode != 0:
        raise ReleaseUnavailableError(f"pip could not unpack {wheel.name}: {_tail(proc)}")
    return into
