"""Tiny corpora, and ``zoo`` run as a console script would run it."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import numpy as np

WORDS = ("def", "return", "class", "import", "alpha", "beta", "gamma", "self", "value", "(x)")


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


def write_corpus(
    directory: pathlib.Path, *, files: int = 12, lines: int = 40, seed: int = 0
) -> pathlib.Path:
    """A directory of small text files of repetitive pseudo-code (easy to learn)."""
    rng = np.random.default_rng(seed)
    directory.mkdir(parents=True, exist_ok=True)
    for i in range(files):
        text = "\n".join(" ".join(rng.choice(WORDS, 8)) for _ in range(lines))
        (directory / f"doc{i:02d}.txt").write_text(text + "\n")
    return directory


# A ChatML-style template, as many instruction-tuned checkpoints ship in tokenizer_config.json.
