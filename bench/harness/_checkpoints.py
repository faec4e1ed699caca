"""Random Hugging Face Llama checkpoints for the benchmarks that compare with PyTorch."""

from __future__ import annotations

import pathlib
from collections.abc import Mapping
from typing import Any


def llama_checkpoint(directory: pathlib.Path, shape: Mapping[str, Any]) -> pathlib.Path:
    """A random ``LlamaForCausalLM`` of ``shape`` (seed 0, the tiny test tokenizer's vocabulary
    of 256) saved in ``directory`` with that tokenizer beside it."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from zoo_train.testing import tiny_tokenizer

    torch.manual_seed(0)
    config = LlamaConfig(**shape, vocab_size=256, bos_token_id=1, eos_token_id=2)
    LlamaForCausalLM(config).save_pretrained(directory)
    tiny_tokenizer(directory)
    return directory
