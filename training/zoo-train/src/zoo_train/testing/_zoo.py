"""``zoo`` run as a console script would run it."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys


def run_zoo(*args: str, cwd: pathlib.Path) -> subprocess.CompletedProcess[str]:
    """``zoo ARGS`` in a subprocess (the installed console script's entry point)."""
    code = "import sys; from zoo_train.cli import main; sys.exit(main())"
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
        timeout=300,
    )
