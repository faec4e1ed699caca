"""Qwen3-MoE: Qwen3 with a mixture of narrower experts, optionally every ``decoder_sparse_step``
layers and not on ``mlp_only_layers``."""

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
    "n_experts": "num_experts",
    "experts_per_token": "num_experts_per_tok",
    "expert_hidden": "moe_intermediate_size",
}


def read(hf: Mapping[str, Any]) -> dict[str, Any]:
    """ModelConfig fields of a Qwen3-MoE config.json."""
    hf = {"num_experts": 128, "num_experts_per_tok": 8, "moe_intermediate_size": 768, **hf}
    out = _decoder.read(hf, "qwen3_moe")
    step, dense = hf.get("decoder_sparse_step", 1), hf.get("mlp_only_layers") or []
    if not isinstance(step, int) or step < 1:
        raise ValueError(
            f"qwen3_moe config.json has decoder_sparse_step {step!r}; it must be >= 1."
        )
    window = hf.get("sliding_window") if hf.get("use_sliding_window", False) else None
    return {
        **out,
        **_decoder.attention_bias(hf),
        "qk_norm": True,
        "sliding_window": window,
        **_experts.read(hf, "qwen3_moe", required=False),
        "expert_hidden": hf["moe_intermediate_size"],
        "normalize_expert_weights": bool(hf.get("norm_topk_prob", False)),
        "moe_every": step,
        "dense_layers": tuple(int(i) for i in dense),
    }


def write(c: ModelConfig) -> dict[str, Any]:
    """Qwen3-MoE's config.json keys for ``c``."""
    return {
        **_decoder.write(c),
        "attention_bias": c.qkv_bias,
        "use_sliding_window": c.sliding_window is not None,
        "sliding_window": c.sliding_window,
        "num_experts": c.n_experts,
        "moe_intermediate_size": c.expert_width,
        "norm_topk_prob": c.normalize_expert_weights,
        "decoder_sparse_step": c.moe_every,
        "mlp_only_layers": list(c.dense_layers),
        **_experts.write(c),
    }


def layer_rules(config: ModelConfig, layer: int) -> list[Rule]:
    """A layer's tensors; its experts' are ``mlp.experts.{e}.gate_proj up_proj down_proj``."""
    return _experts.layer_rules(
        config,
        layer,
        module="mlp",
        router="gate",
        projections=("gate_proj", "up_proj", "down_proj"),
    )


@functools.cache
def presets() -> dict[str, ModelConfig]:
    """Qwen3 30B-A3B and ``qwen3-moe-tiny``."""
    base: dict[str, Any] = dict(
        family="qwen3_moe",
        vocab_size=151936,
        activation="silu",
        norm_eps=1e-6,
        max_position=40960,
        rope_theta=1000000.0,
        qk_norm=True,
        normalize_expert_weights=True,
        output_router_logits=True,
        bos_token_id=151643,
        eos_token_id=151645,
    )
    return {
        "qwen3-30b-a3b": ModelConfig(
            **base,
            d_model=2048,
            n_layers=48,
            n_heads=32,
            n_kv_heads=4,
            head_dim=128,
            mlp_hidden=6144,
            expert_hidden=768,
            n_experts=128,
            experts_per_token=8,
        ),
        # 8 experts, top 2 of probabilities not renormalised, narrower experts, and a dense MLP
        # every other layer (decoder_sparse_step 2) of 4: a pattern the layer stack scans in
        # pairs.
        "qwen3-moe-tiny": ModelConfig(
            **{**base, **TINY, **TINY_IDS, "n_layers": 4, "normalize_expert_weights": False},
            n_kv_heads=2,
            head_dim=32,
            mlp_hidden=128,
            expert_hidden=64,
            n_experts=8,
            experts_per_token=2,
            moe_every=2,
        ),
    }


FAMILY = register(
    _decoder.family(
        "qwen3_moe",
        "Qwen3MoeForCausalLM",
        read,
        write,
        presets,
        hf_keys=KEYS,
        layer_rules=layer_rules,
    )
)
