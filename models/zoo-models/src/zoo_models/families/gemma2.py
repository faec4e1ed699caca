"""Gemma 2: alternating sliding-window and global layers, logit soft caps, post-norms and
``1 + weight`` RMSNorm."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from .._config import ModelConfig
from .._hf_fields import as_float, layer_types, number, window_pattern
from . import _decoder
from ._registry import register
from ._tiny import TINY

__all__ = ["FAMILY", "KEYS", "write"]

KEYS = {**_decoder.KEYS, "activation": "hidden_activation"}


def read(hf: Mapping[str, Any]) -> dict[str, Any]:
    """ModelConfig fields of a Gemma 2 config.json."""
    out = _decoder.read(
        {**hf, "hidden_act": hf.get("hidden_activation", "gelu_pytorch_tanh")}, "gemma2"
    )
    n_layers = out["n_layers"]
    kinds = hf.get("layer_types") or [
        "sliding_attention" if i % 2 == 0 else "full_attention" for i in range(n_layers)
    ]
    pattern = window_pattern({"layer_types": kinds}, n_layers, "gemma2")
    window = hf.get("sliding_window")
    return {
        **out,
        "tie_embeddings": bool(hf.get("tie_word_embeddings", True)),
        "norm_unit_offset": True,
        **_decoder.attention_bias(hf),
        "sliding_window": window if window is not None and any(pattern) else None,
        "window_pattern": pattern if window is not None and any(pattern) else (True,),
        "attn_logit_soft_cap": hf.get("attn_logit_softcapping"),
        "final_logit_soft_cap": hf.get("final_logit_softcapping"),
        "query_pre_attn_scalar": as_float(hf, "query_pre_attn_scalar", 256),
        "embedding_scale": True,
        "post_norms": True,
    }


def write(c: ModelConfig) -> dict[str, Any]:
    """Gemma 2's config.json keys for ``c`` (Gemma 3 writes them too)."""
    out = _decoder.write(c)
    out["hidden_activation"] = out.pop("hidden_act")
    return {
        **out,
        "attention_bias": c.qkv_bias,
        "sliding_window": c.sliding_window,
        "layer_types": layer_types(c),
        "attn_logit_softcapping": c.attn_logit_soft_cap,
        "final_logit_softcapping": c.final_logit_soft_cap,
        "query_pre_attn_scalar": number(
            c.dim_per_head if c.query_pre_attn_scalar is None else c.query_pre_attn_scalar
        ),
    }


def _gemma2(**kw: Any) -> ModelConfig:
    base = dict(
        family="gemma2",
        activation="gelu_tanh",
        mlp_gated=True,
        norm="rmsnorm",
        norm_eps=1e-6,
        norm_unit_offset=True,
        rope_theta=10000.0,
        tie_embeddings=True,
        window_pattern=(True, False),
        attn_logit_soft_cap=50.0,
        final_logit_soft_cap=30.0,
        embedding_scale=True,
        post_norms=True,
    )
    return ModelConfig(**{**base, **kw})


@functools.cache
def presets() -> dict[str, ModelConfig]:
    """Gemma 2 2B and ``gemma2-tiny`` (a window of 8, head_dim apart from d_model / heads)."""
    return {
        "gemma-2-2b": _gemma2(
            vocab_size=256000,
            d_model=2304,
            n_layers=26,
            n_heads=8,
            n_kv_heads=4,
            head_dim=256,
            mlp_hidden=9216,
            max_position=8192,
            sliding_window=4096,
            query_pre_attn_scalar=256,
            bos_token_id=2,
            eos_token_id=1,
            pad_token_id=0,
        ),
        "gemma2-tiny": _gemma2(
            **TINY,
            n_kv_heads=2,
            head_dim=32,
            mlp_hidden=128,
            sliding_window=8,
            query_pre_attn_scalar=24,
        ),
    }


FAMILY = register(
    _decoder.family("gemma2", "Gemma2ForCausalLM", read, write, presets, hf_keys=KEYS)
)
