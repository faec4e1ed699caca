"""Llama (2, 3, 3.1, 3.2): the Llama-style decoder with optional biases and Llama 3 rotary
scaling."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from .._config import ModelConfig
from . import _decoder
from ._registry import register
from ._tiny import TINY

__all__ = ["FAMILY"]


def read(hf: Mapping[str, Any]) -> dict[str, Any]:
    """ModelConfig fields of a Llama config.json."""
    return {
        **_decoder.read(hf, "llama"),
        **_decoder.attention_bias(hf),
        "mlp_bias": bool(hf.get("mlp_bias", False)),
    }


def write(c: ModelConfig) -> dict[str, Any]:
    """Llama's config.json keys for ``c``."""
    return {**_decoder.write(c), "attention_bias": c.qkv_bias, "mlp_bias": c.mlp_bias}


@functools.cache
def presets() -> dict[str, ModelConfig]:
    """Llama 3.2 1B, Llama 3.1 8B, Llama 2 7B and ``llama-tiny`` (GQA, Llama 3 rotary
    scaling)."""
    return {
        "llama-3.2-1b": ModelConfig(
            family="llama",
            vocab_size=128256,
            d_model=2048,
            n_layers=16,
            n_heads=32,
            n_kv_heads=8,
            head_dim=64,
            mlp_hidden=8192,
            max_position=131072,
            rope_theta=500000.0,
            rope_scaling="llama3",
            rope_factor=32.0,
            rope_low_freq_factor=1.0,
            rope_high_freq_factor=4.0,
            rope_original_max_position=8192,
            tie_embeddings=True,
            bos_token_id=128000,
            eos_token_id=128001,
        ),
        # Meta-Llama-3.1-8B's config.json: 128k positions by Llama 3 rotary scaling.
        "llama-3.1-8b": ModelConfig(
            family="llama",
            vocab_size=128256,
            d_model=4096,
            n_layers=32,
            n_heads=32,
            n_kv_heads=8,
            head_dim=128,
            mlp_hidden=14336,
            max_position=131072,
            rope_theta=500000.0,
            rope_scaling="llama3",
            rope_factor=8.0,
            rope_low_freq_factor=1.0,
            rope_high_freq_factor=4.0,
            rope_original_max_position=8192,
            bos_token_id=128000,
            eos_token_id=128001,
        ),
        "llama-2-7b": ModelConfig(
            family="llama",
            vocab_size=32000,
            d_model=4096,
            n_layers=32,
            n_heads=32,
            mlp_hidden=11008,
            max_position=4096,
            bos_token_id=1,
            eos_token_id=2,
        ),
        "llama-tiny": ModelConfig(
            family="llama",
            **TINY,
            n_kv_heads=2,
            mlp_hidden=128,
            rope_theta=500000.0,
            rope_scaling="llama3",
            rope_factor=8.0,
            rope_original_max_position=64,
        ),
    }


FAMILY = register(_decoder.family("llama", "LlamaForCausalLM", read, write, presets))
