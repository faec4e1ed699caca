"""Helpers for the command-line tests: running `zoo`, tiny corpora and Hugging Face models."""

from __future__ import annotations

import contextlib
import os
import pathlib
import subprocess
import sys
from collections.abc import Iterator

import numpy as np

from zoo_data.testing import WORDS as WORDS
from zoo_data.testing import tiny_tokenizer as tiny_tokenizer
from zoo_data.testing import write_corpus as write_corpus


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


#: The shape of the tiny Hugging Face checkpoints the tests build (the tiny tokenizer's vocabulary).
TINY_HF_SHAPE = dict(
    vocab_size=256,
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
)


def tiny_hf_llama(
    directory: pathlib.Path, *, seed: int = 0, tokenizer: bool = True, dtype: str = "float32"
) -> pathlib.Path:
    """A random Hugging Face ``LlamaForCausalLM`` (vocab 256) saved with ``save_pretrained``,
    in ``dtype``, with :func:`tiny_tokenizer` beside it unless ``tokenizer=False``."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(
        **TINY_HF_SHAPE,
        bos_token_id=1,
        eos_token_id=2,
        max_position_embeddings=128,
        tie_word_embeddings=False,
    )
    LlamaForCausalLM(config).to(getattr(torch, dtype)).save_pretrained(directory)
    if tokenizer:
        tiny_tokenizer(directory)
    return directory


def hf_logits(directory: pathlib.Path, ids: np.ndarray) -> np.ndarray:
    """Logits of the Hugging Face model in ``directory`` (transformers, float32)."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(directory, torch_dtype=torch.float32)
    model.eval()
    with torch.no_grad():
        return model(torch.as_tensor(ids, dtype=torch.long)).logits.numpy()


@contextlib.contextmanager
def mounted_tmpfs(directory: pathlib.Path, size: str, *, read_only: bool = False) -> Iterator[None]:
    """A tmpfs of ``size`` (e.g. ``"700k"``) mounted on ``directory`` for the block: a small
    disk that fills, a read-only one, or a mount point nothing can delete. Skips the test where
    mounting is not allowed (it needs root or CAP_SYS_ADMIN)."""
    import pytest

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
