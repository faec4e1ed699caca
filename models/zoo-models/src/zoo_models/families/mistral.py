"""Mistral: the Llama-style decoder with a sliding window on every layer."""

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
    """ModelConfig fields of a Mistral config.json."""
    return {**_decoder.read(hf, "mistral"), "sliding_window": hf.get("sliding_window")}


def write(c: ModelConfig) -> dict[str, Any]:
    """Mistral's config.json keys for ``c``."""
    return {**_decoder.write(c), "sliding_window": c.sliding_window}


@functools.cache
def presets() -> dict[str, ModelConfig]:
    """Mistral 7B and ``mistral-tiny`` (a window of 8)."""
    return {
        "mistral-7b": ModelConfig(
            family="mistral",
            vocab_size=32000,
            d_model=4096,
            n_layers=32,
            n_heads=32,
            n_kv_heads=8,
            mlp_hidden=14336,
            max_position=32768,
            sliding_window=4096,
            bos_token_id=1,
            eos_token_id=2,
        ),
        "mistral-tiny": ModelConfig(
            family="mistral", **TINY, n_kv_heads=2, mlp_hidden=128, sliding_window=8
        ),
    }


FAMILY = register(_decoder.family("mistral", "MistralForCausalLM", read, write, presets))
