"""The Llama-style decoder that every family but GPT-2 builds on: its ``config.json`` keys, the
reader and writer of the fields they share, and the weight names of ``model.layers.{i}``."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from .._config import ModelConfig
from .._hf_fields import ACT_OUT, activation, as_float, require, rope_in, rope_out, special_ids
from .._hf_weights import Rule, one
from ._registry import Family, Reader, Writer

__all__ = [
    "KEYS",
    "attention_bias",
    "family",
    "language_model_aliases",
    "layer_rules",
    "read",
    "top_rules",
    "write",
]

#: The config.json key of each ModelConfig field these families set.
KEYS = {
    "d_model": "hidden_size",
    "n_layers": "num_hidden_layers",
    "n_heads": "num_attention_heads",
    "n_kv_heads": "num_key_value_heads",
    "mlp_hidden": "intermediate_size",
    "max_position": "max_position_embeddings",
    "norm_eps": "rms_norm_eps",
    "activation": "hidden_act",
    "rope_factor": "rope_scaling.factor",
    "rope_low_freq_factor": "rope_scaling.low_freq_factor",
    "rope_high_freq_factor": "rope_scaling.high_freq_factor",
    "rope_original_max_position": "rope_scaling.original_max_position_embeddings",
    "window_pattern": "layer_types",
    "attn_logit_soft_cap": "attn_logit_softcapping",
    "final_logit_soft_cap": "final_logit_softcapping",
}


def read(hf: Mapping[str, Any], model_type: str) -> dict[str, Any]:
    """The shapes, gated MLP, RMSNorm, rotary and special ids of a Llama-style config.json."""
    require(
        hf,
        model_type,
        "vocab_size",
        "hidden_size",
        "intermediate_size",
        "num_hidden_layers",
        "num_attention_heads",
    )
    n_heads = hf["num_attention_heads"]
    return {
        "family": model_type,
        "vocab_size": hf["vocab_size"],
        "d_model": hf["hidden_size"],
        "n_layers": hf["num_hidden_layers"],
        "n_heads": n_heads,
        "n_kv_heads": hf.get("num_key_value_heads") or n_heads,
        "head_dim": hf.get("head_dim") or hf["hidden_size"] // n_heads,
        "mlp_hidden": hf["intermediate_size"],
        "activation": activation(hf.get("hidden_act", "silu"), model_type),
        "mlp_gated": True,
        "norm": "rmsnorm",
        "norm_eps": as_float(hf, "rms_norm_eps", 1e-6),
        "positional": "rope",
        "max_position": hf.get("max_position_embeddings", 2048),
        "tie_embeddings": bool(hf.get("tie_word_embeddings", False)),
        **rope_in(hf, model_type),
        **special_ids(hf),
    }


def attention_bias(hf: Mapping[str, Any]) -> dict[str, Any]:
    """``attention_bias``: biases on q, k, v and the attention output, or on none."""
    bias = bool(hf.get("attention_bias", False))
    return {"qkv_bias": bias, "out_bias": bias}


def write(c: ModelConfig) -> dict[str, Any]:
    """The config.json keys :func:`read` reads."""
    return {
        "vocab_size": c.vocab_size,
        "hidden_size": c.d_model,
        "intermediate_size": c.mlp_hidden,
        "num_hidden_layers": c.n_layers,
        "num_attention_heads": c.n_heads,
        "num_key_value_heads": c.kv_heads,
        "head_dim": c.dim_per_head,
        "hidden_act": ACT_OUT[c.activation],
        "max_position_embeddings": c.max_position,
        "rms_norm_eps": c.norm_eps,
        "attention_dropout": 0.0,
        **rope_out(c),
    }


def top_rules(config: ModelConfig) -> list[Rule]:
    """The embedding, the final norm and (untied) the output head."""
    top = [
        one("model.embed_tokens.weight", "embed.weight"),
        one("model.norm.weight", "final_norm.weight"),
    ]
    if not config.tie_embeddings:
        top.append(one("lm_head.weight", "lm_head.weight"))
    return top


def layer_rules(config: ModelConfig, layer: int) -> list[Rule]:
    """A dense layer's tensors: attention, gated MLP and the norms ``config`` has."""
    a = "model.layers.{i}.self_attn."
    m = "model.layers.{i}.mlp."
    n = "model.layers.{i}."
    rules = [one(f"{a}{x}_proj.weight", f"attn.{x}_proj.weight") for x in "qkvo"]
    if config.qkv_bias:
        rules += [one(f"{a}{x}_proj.bias", f"attn.{x}_proj.bias") for x in "qkv"]
    if config.out_bias:
        rules.append(one(f"{a}o_proj.bias", "attn.o_proj.bias"))
    if config.qk_norm:
        rules += [one(f"{a}{x}_norm.weight", f"attn.{x}_norm.weight") for x in "qk"]
    for hf, ours in (("gate_proj", "gate"), ("up_proj", "up"), ("down_proj", "down")):
        rules.append(one(f"{m}{hf}.weight", f"mlp.{ours}.weight"))
        if config.mlp_bias:
            rules.append(one(f"{m}{hf}.bias", f"mlp.{ours}.bias"))
    if config.pre_norms:
        rules.append(one(n + "input_layernorm.weight", "attn_norm.weight"))
    if config.post_norms:
        # Gemma 2 and 3, OLMo 2: post_attention_layernorm normalises the attention output,
        # post_feedforward_layernorm the MLP's; with pre-norms the MLP's is
        # pre_feedforward_layernorm.
        rules += [
            one(n + "post_attention_layernorm.weight", "post_attn_norm.weight"),
            one(n + "post_feedforward_layernorm.weight", "post_mlp_norm.weight"),
        ]
        if config.pre_norms:
            rules.append(one(n + "pre_feedforward_layernorm.weight", "mlp_norm.weight"))
    else:
        rules.append(one(n + "post_attention_layernorm.weight", "mlp_norm.weight"))
    return rules


def language_model_aliases(prefixes: tuple[str, ...]) -> Callable[[set[str]], dict[str, str]]:
    """``Family.aliases`` for an image-and-text checkpoint that keeps its language model's
    ``model.*`` tensors under one of ``prefixes`` (``model.language_model.``, ...)."""

    def aliases(names: set[str]) -> dict[str, str]:
        if "model.embed_tokens.weight" not in names:
            for prefix in prefixes:
                if f"{prefix}embed_tokens.weight" in names:
                    return {f"model.{n[len(prefix) :]}": n for n in names if n.startswith(prefix)}
        return {}

    return aliases


def family(
    name: str,
    architecture: str,
    read: Reader,
    write: Writer,
    presets: Callable[[], Mapping[str, ModelConfig]],
    **changes: Any,
) -> Family:
    """A Llama-style :class:`Family`: these config keys and weight rules, unless ``changes``
    (further :class:`Family` fields) name others."""
    defaults: dict[str, Any] = {"hf_keys": KEYS, "top_rules": top_rules, "layer_rules": layer_rules}
    return Family(
        name=name,
        architecture=architecture,
        read=read,
        write=write,
        presets=presets,
        **{**defaults, **changes},
    )
