"""OLMo 2: the Llama-style decoder with norms after attention and MLP only, and qk-norm over
the whole q and k projections."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from .._config import ModelConfig
from . import _decoder
from ._registry import register
from ._tiny import TINY, TINY_IDS

__all__ = ["FAMILY"]


def read(hf: Mapping[str, Any]) -> dict[str, Any]:
    """ModelConfig fields of an OLMo 2 config.json."""
    return {
        **_decoder.read({"rms_norm_eps": 1e-5, **hf}, "olmo2"),
        **_decoder.attention_bias(hf),
        "qk_norm": "projection",
        "pre_norms": False,
        "post_norms": True,
    }


def write(c: ModelConfig) -> dict[str, Any]:
    """OLMo 2's config.json keys for ``c``."""
    return {**_decoder.write(c), "attention_bias": c.qkv_bias}


def _olmo2(**kw: Any) -> ModelConfig:
    base = dict(
        family="olmo2",
        vocab_size=100352,
        activation="silu",
        norm_eps=1e-6,
        max_position=4096,
        rope_theta=500000.0,
        qk_norm="projection",
        pre_norms=False,
        post_norms=True,
        eos_token_id=100257,
        pad_token_id=100277,
    )
    return ModelConfig(**{**base, **kw})


@functools.cache
def presets() -> dict[str, ModelConfig]:
    """OLMo 2 1B, 7B and ``olmo2-tiny``."""
    return {
        "olmo-2-1b": _olmo2(d_model=2048, n_layers=16, n_heads=16, mlp_hidden=8192),
        "olmo-2-7b": _olmo2(d_model=4096, n_layers=32, n_heads=32, mlp_hidden=11008),
        "olmo2-tiny": _olmo2(**{**TINY, **TINY_IDS}, n_kv_heads=2, mlp_hidden=128),
    }


FAMILY = register(_decoder.family("olmo2", "Olmo2ForCausalLM", read, write, presets))
