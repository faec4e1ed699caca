"""Tiny Hugging Face checkpoints, built on the spot (no download).

torch and transformers are test tools, not dependencies of zoo-train: each helper imports
what it uses when called. The tokenizer is zoo-data's (``zoo_data.testing.tiny_tokenizer``).
"""

from __future__ import annotations

import pathlib

import numpy as np

from zoo_data.testing import tiny_tokenizer

#: The shape of the tiny Hugging Face checkpoints the tests build (the tiny tokenizer's vocabulary).
TINY_HF_SHAPE = dict(
    vocab_size=256,
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
)
#: A tiny Qwen3.5's shape (``Qwen3_5TextConfig`` or ``Qwen3_5MoeTextConfig``): three gated
#: DeltaNet layers, then a gated attention layer.
TINY_QWEN3_5_SHAPE = dict(
    **{**TINY_HF_SHAPE, "num_hidden_layers": 4},
    head_dim=16,
    linear_num_key_heads=2,
    linear_num_value_heads=4,
    linear_key_head_dim=8,
    linear_value_head_dim=8,
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
