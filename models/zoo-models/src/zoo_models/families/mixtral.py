"""Mixtral: Mistral with a mixture of experts in every layer (top-k renormalised)."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from .._config import ModelConfig
from .._hf_weights import Rule
from . import _decoder, _experts
from ._registry import register
from ._tiny import TINY, TINY_IDS

__all__ = ["FAMILY"]

KEYS = {
    **_decoder.KEYS,
    "n_experts": "num_local_experts",
    "experts_per_token": "num_experts_per_tok",
}

# MixtralConfig's defaults that differ from the Llama-style reader's.
_DEFAULTS: dict[str, Any] = {
    "rope_theta": 1e6,
    "max_position_embeddings": 4096 * 32,
    "rms_norm_eps": 1e-5,
    "num_local_experts": 8,
    "num_experts_per_tok": 2,
}


def read(hf: Mapping[str, Any]) -> dict[str, Any]:
    """ModelConfig fields of a Mixtral config.json."""
    hf = {**_DEFAULTS, **hf}
    if hf.get("router_jitter_noise"):
        raise ValueError(
            f"mixtral config.json sets router_jitter_noise {hf['router_jitter_noise']!r}, which "
            "is not supported; set it to 0."
        )
    return {
        **_decoder.read(hf, "mixtral"),
        "sliding_window": hf.get("sliding_window"),
        **_experts.read(hf, "mixtral", required=True),
        "normalize_expert_weights": True,
    }


def write(c: ModelConfig) -> dict[str, Any]:
    """Mixtral's config.json keys for ``c``."""
    return {
        **_decoder.write(c),
        "intermediate_size": c.expert_width,
        "sliding_window": c.sliding_window,
        "num_local_experts": c.n_experts,
        "router_jitter_noise": 0.0,
        **_experts.write(c),
    }


def layer_rules(config: ModelConfig, layer: int) -> list[Rule]:
    """A layer's tensors; its experts' are ``block_sparse_moe.experts.{e}.w1 w3 w2``."""
    return _experts.layer_rules(
        config, layer, module="block_sparse_moe", router="gate", projections=("w1", "w3", "w2")
    )


@functools.cache
def presets() -> dict[str, ModelConfig]:
    """Mixtral 8x7B and ``mixtral-tiny`` (8 experts, top 2, renormalised)."""
    base: dict[str, Any] = dict(
        family="mixtral",
        activation="silu",
        norm_eps=1e-5,
        rope_theta=1000000.0,
        n_experts=8,
        experts_per_token=2,
        # Training here balances the experts by default (transformers only when asked).
        output_router_logits=True,
    )
    return {
        "mixtral-8x7b": ModelConfig(
            **base,
            vocab_size=32000,
            d_model=4096,
            n_layers=32,
            n_heads=32,
            n_kv_heads=8,
            mlp_hidden=14336,
            max_position=32768,
            router_aux_loss_coef=0.02,
            bos_token_id=1,
            eos_token_id=2,
        ),
        "mixtral-tiny": ModelConfig(**base, **TINY, **TINY_IDS, n_kv_heads=2, mlp_hidden=128),
    }


FAMILY = register(
    _decoder.family(
        "mixtral", "MixtralForCausalLM", read, write, presets, hf_keys=KEYS, layer_rules=layer_rules
    )
)
