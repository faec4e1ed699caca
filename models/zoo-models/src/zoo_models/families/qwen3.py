"""Qwen3: Qwen2 without the fixed q, k, v biases, with per-head qk-norm and a head width of its
own."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from .._config import ModelConfig
from . import _decoder
from ._registry import register
from ._tiny import TINY, TINY_IDS
from .qwen2 import read_sliding, write_sliding

__all__ = ["FAMILY"]


def read(hf: Mapping[str, Any]) -> dict[str, Any]:
    """ModelConfig fields of a Qwen3 config.json."""
    # transformers' Qwen3 default head_dim is 128, whatever hidden_size / heads is.
    out = _decoder.read({"head_dim": 128, **hf}, "qwen3")
    return {
        **out,
        **read_sliding(hf, out["n_layers"], "qwen3"),
        **_decoder.attention_bias(hf),
        "qk_norm": True,
    }


def write(c: ModelConfig) -> dict[str, Any]:
    """Qwen3's config.json keys for ``c``."""
    return {**_decoder.write(c), **write_sliding(c), "attention_bias": c.qkv_bias}


def _qwen3(**kw: Any) -> ModelConfig:
    base = dict(
        family="qwen3",
        vocab_size=151936,
        activation="silu",
        norm_eps=1e-6,
        head_dim=128,
        max_position=40960,
        rope_theta=1000000.0,
        qk_norm=True,
        bos_token_id=151643,
        eos_token_id=151645,  # <|im_end|>: the post-trained checkpoints end their turns with it
    )
    return ModelConfig(**{**base, **kw})


@functools.cache
def presets() -> dict[str, ModelConfig]:
    """Qwen3 0.6B, 1.7B, 8B and ``qwen3-tiny``."""
    return {
        "qwen3-0.6b": _qwen3(
            d_model=1024,
            n_layers=28,
            n_heads=16,
            n_kv_heads=8,
            mlp_hidden=3072,
            tie_embeddings=True,
        ),
        "qwen3-1.7b": _qwen3(
            d_model=2048,
            n_layers=28,
            n_heads=16,
            n_kv_heads=8,
            mlp_hidden=6144,
            tie_embeddings=True,
        ),
        "qwen3-8b": _qwen3(d_model=4096, n_layers=36, n_heads=32, n_kv_heads=8, mlp_hidden=12288),
        # head_dim independent of d_model / n_heads, per-head qk-norm, a GQA group of 2.
        "qwen3-tiny": _qwen3(
            **{**TINY, **TINY_IDS}, n_kv_heads=2, head_dim=32, mlp_hidden=128, tie_embeddings=True
        ),
    }


FAMILY = register(_decoder.family("qwen3", "Qwen3ForCausalLM", read, write, presets))
