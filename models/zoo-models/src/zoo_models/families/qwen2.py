"""Qwen2: the Llama-style decoder with q, k and v biases and Qwen's optional sliding window."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from .._config import ModelConfig
from .._hf_fields import layer_types, window_pattern
from . import _decoder
from ._registry import register
from ._tiny import TINY

__all__ = ["FAMILY", "read_sliding", "write_sliding"]


def read_sliding(hf: Mapping[str, Any], n_layers: int, model_type: str) -> dict[str, Any]:
    """Qwen's sliding window: ``use_sliding_window``, on the layers ``layer_types`` names (or
    from ``max_window_layers`` on, 28 by default, as transformers reads it)."""
    window = hf.get("sliding_window") if hf.get("use_sliding_window", False) else None
    if window is None:
        return {}
    kinds = hf.get("layer_types")
    if kinds is None:
        first = hf.get("max_window_layers", 28)
        kinds = ["sliding_attention" if i >= first else "full_attention" for i in range(n_layers)]
    pattern = window_pattern({"layer_types": kinds}, n_layers, model_type)
    return {"sliding_window": window, "window_pattern": pattern} if any(pattern) else {}


def write_sliding(c: ModelConfig) -> dict[str, Any]:
    """The keys :func:`read_sliding` reads."""
    return {
        "use_sliding_window": c.sliding_window is not None,
        "sliding_window": c.sliding_window,
        "max_window_layers": c.n_layers,
        "layer_types": layer_types(c),
    }


def read(hf: Mapping[str, Any]) -> dict[str, Any]:
    """ModelConfig fields of a Qwen2 config.json."""
    out = {**_decoder.read(hf, "qwen2"), "qkv_bias": True}
    return {**out, **read_sliding(hf, out["n_layers"], "qwen2")}


def write(c: ModelConfig) -> dict[str, Any]:
    """Qwen2's config.json keys for ``c``."""
    return {**_decoder.write(c), **write_sliding(c)}


@functools.cache
def presets() -> dict[str, ModelConfig]:
    """Qwen2 0.5B and ``qwen2-tiny`` (MQA, tied)."""
    return {
        "qwen2-0.5b": ModelConfig(
            family="qwen2",
            vocab_size=151936,
            d_model=896,
            n_layers=24,
            n_heads=14,
            n_kv_heads=2,
            mlp_hidden=4864,
            norm_eps=1e-6,
            max_position=32768,
            rope_theta=1000000.0,
            tie_embeddings=True,
            qkv_bias=True,
            eos_token_id=151643,
        ),
        "qwen2-tiny": ModelConfig(
            family="qwen2",
            **TINY,
            n_kv_heads=1,
            mlp_hidden=128,
            norm_eps=1e-6,
            rope_theta=1000000.0,
            tie_embeddings=True,
            qkv_bias=True,
        ),
    }


FAMILY = register(_decoder.family("qwen2", "Qwen2ForCausalLM", read, write, presets))
