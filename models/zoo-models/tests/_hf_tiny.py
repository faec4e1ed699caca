"""Tiny random Hugging Face models of every family, built locally (no downloads)."""

from __future__ import annotations

import pathlib

import torch
import transformers

VOCAB = 128
SEQ = 16  # longer than the sliding windows below, so the window matters

_COMMON = dict(
    vocab_size=VOCAB,
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    bos_token_id=1,
    eos_token_id=2,
    pad_token_id=0,
)

CONFIGS = {
    "gpt2": lambda: transformers.GPT2Config(
        vocab_size=VOCAB,
        n_embd=32,
        n_layer=2,
        n_head=4,
        n_positions=64,
        bos_token_id=1,
        eos_token_id=2,
    ),
    "gpt2-untied": lambda: transformers.GPT2Config(
        vocab_size=VOCAB,
        n_embd=32,
        n_layer=2,
        n_head=4,
        n_positions=64,
        n_inner=48,
        activation_function="gelu",
        tie_word_embeddings=False,
        bos_token_id=1,
        eos_token_id=2,
    ),
    "llama3": lambda: transformers.LlamaConfig(
        **_COMMON,
        rope_parameters={
            "rope_type": "llama3",
            "rope_theta": 10000.0,
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 16,
        },
    ),
    "llama-linear": lambda: transformers.LlamaConfig(
        **_COMMON,
        rope_parameters={"rope_type": "linear", "rope_theta": 500.0, "factor": 4.0},
        attention_bias=True,
        mlp_bias=True,
    ),
    "mistral": lambda: transformers.MistralConfig(**_COMMON, sliding_window=4),
    "qwen2": lambda: transformers.Qwen2Config(**_COMMON, tie_word_embeddings=True),
    "qwen2-sliding": lambda: transformers.Qwen2Config(
        **_COMMON, use_sliding_window=True, sliding_window=4, max_window_layers=1
    ),
    "gemma2": lambda: transformers.Gemma2Config(
        **_COMMON,
        head_dim=16,  # heads * head_dim != hidden_size, as in real Gemma 2
        sliding_window=4,
        query_pre_attn_scalar=12,
        attn_logit_softcapping=2.0,
        final_logit_softcapping=3.0,
    ),
}


def make_hf_model(
    name: str, directory: pathlib.Path, seed: int = 0
) -> transformers.PreTrainedModel:
    """A random model of config ``name`` saved with ``save_pretrained`` in ``directory``.

    Every parameter (norm weights and biases included) gets noise, so none sits at its
    identity initialisation where a mapping mistake would go unnoticed.
    """
    torch.manual_seed(seed)
    model = transformers.AutoModelForCausalLM.from_config(
        CONFIGS[name](), attn_implementation="eager", dtype=torch.float32
    )
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.2 * torch.randn_like(p))
    model.eval()
    model.save_pretrained(directory)
    return model


def hf_logits(model: transformers.PreTrainedModel, ids, positions=None):
    """float32 numpy logits of a transformers model."""
    with torch.no_grad():
        kwargs = {} if positions is None else {"position_ids": torch.as_tensor(positions)}
        return model(torch.as_tensor(ids), **kwargs).logits.float().numpy()
