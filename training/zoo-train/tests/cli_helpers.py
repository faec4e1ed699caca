"""Helpers for the command-line tests that need pytest (the others are ``zoo_train.testing``)."""

from __future__ import annotations

import contextlib
import io
import json
import pathlib
import subprocess
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

# The token-store tests import these from here.
from zoo_data.testing import WORDS as WORDS
from zoo_data.testing import tiny_tokenizer as tiny_tokenizer
from zoo_data.testing import write_corpus as write_corpus


@contextlib.contextmanager
def mounted_tmpfs(directory: pathlib.Path, size: str, *, read_only: bool = False) -> Iterator[None]:
    """A tmpfs of ``size`` (e.g. ``"700k"``) mounted on ``directory`` for the block: a small
    disk that fills, a read-only one, or a mount point nothing can delete. Skips the test where
    mounting is not allowed (it needs root or CAP_SYS_ADMIN)."""
    directory.mkdir(parents=True, exist_ok=True)
    options = f"size={size}" + (",ro" if read_only else "")
    mount = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(directory)],
        capture_output=True,
        text=True,
    )
    if mount.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({mount.stderr.strip() or 'mount failed'})")
    try:
        yield
    finally:
        subprocess.run(["umount", str(directory)], check=True)


def grpo_place(root: pathlib.Path, prompts: Sequence[dict[str, Any]], rewards: str) -> pathlib.Path:
    """``root`` with a tiny Hugging Face Llama (``hf``, a random seed), ``prompts.jsonl`` and
    the reward functions' source ``rewards.py``: what a GRPO command-line test runs on."""
    import numpy as np

    from zoo_train.testing import tiny_hf_llama

    tiny_hf_llama(root / "hf", seed=int(np.random.default_rng().integers(1 << 16)))
    (root / "prompts.jsonl").write_text("".join(json.dumps(r) + "\n" for r in prompts))
    (root / "rewards.py").write_text(rewards)
    return root


def zoo_in_process(argv: Sequence[str]) -> tuple[int, str]:
    """``zoo ARGV`` run in this process: its exit code and what it wrote to stderr."""
    from zoo_train.cli import main

    said = io.StringIO()
    with contextlib.redirect_stderr(said):
        code = main(list(argv))
    return code, said.getvalue()
