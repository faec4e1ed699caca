"""Qwen3.5 (``qwen3_5_text``, ``qwen3_5_moe_text``): three gated DeltaNet layers to each gated
attention layer, dense or with a mixture of experts and a shared expert. The language model of
an image-and-text Qwen3.5 checkpoint (``qwen3_5``, ``qwen3_5_moe``) is read the same way.

The gated DeltaNet layers (``linear_attn.*``: a fused q/k/v projection, a short causal
convolution, the gated delta rule through ``zoo_attention.linear``, a gated RMSNorm) keep a
recurrent state instead of a KV cache; the attention layers (``self_attn.*``) gate their output
by a sigmoid of a second half of ``q_proj`` and rotate a quarter of each head. Every RMSNorm
but the DeltaNet's output norm scales by ``1 + weight``.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any

from .._config import ModelConfig
from .._hf_fields import as_float, rope_out, shortest_pattern
from .._hf_weights import Rule, WeightArray, one
from . import _decoder, _experts
from ._registry import ATTENTION_PROJECTIONS, register
from ._tiny import TINY, TINY_IDS

__all__ = ["DENSE", "MOE", "PREFIXES"]

#: Where an image-and-text checkpoint keeps the language model's ``model.*`` tensors.
PREFIXES = ("model.language_model.",)

# Qwen3_5TextConfig's and Qwen3_5MoeTextConfig's defaults (Qwen3.5-9B, Qwen3.5-35B-A3B): a
# config.json may leave out what equals them.
_DEFAULTS: dict[str, Any] = {
    "vocab_size": 248320,
    "hidden_size": 4096,
    "intermediate_size": 12288,
    "num_hidden_layers": 32,
    "num_attention_heads": 16,
    "num_key_value_heads": 4,
    "head_dim": 256,
    "max_position_embeddings": 32768,
    "rms_norm_eps": 1e-6,
    "linear_conv_kernel_dim": 4,
    "linear_key_head_dim": 128,
    "linear_value_head_dim": 128,
    "linear_num_key_heads": 16,
    "linear_num_value_heads": 32,
}
_MOE_DEFAULTS: dict[str, Any] = {
    **{k: v for k, v in _DEFAULTS.items() if k != "intermediate_size"},
    "hidden_size": 2048,
    "num_hidden_layers": 40,
    "num_key_value_heads": 2,
    "num_experts": 256,
    "num_experts_per_tok": 8,
    "moe_intermediate_size": 512,
    "shared_expert_intermediate_size": 512,
}

KEYS = {
    **_decoder.KEYS,
    "linear_pattern": "layer_types",
    "linear_qk_heads": "linear_num_key_heads",
    "linear_heads": "linear_num_value_heads",
    "linear_key_dim": "linear_key_head_dim",
    "linear_value_dim": "linear_value_head_dim",
    "linear_conv_width": "linear_conv_kernel_dim",
    "rotary_fraction": "partial_rotary_factor",
    "n_experts": "num_experts",
    "experts_per_token": "num_experts_per_tok",
    "expert_hidden": "moe_intermediate_size",
    "shared_expert_hidden": "shared_expert_intermediate_size",
}


def _linear_pattern(hf: Mapping[str, Any], n_layers: int, model_type: str) -> tuple[bool, ...]:
    """The shortest pattern ``layer_types`` repeats (True: a gated DeltaNet layer), or every
    ``full_attention_interval``-th layer attention when there are no layer types."""
    kinds = hf.get("layer_types")
    if kinds is None:
        every = hf.get("full_attention_interval", 4)
        if isinstance(every, bool) or not isinstance(every, int) or every < 1:
            raise ValueError(f"{model_type} config.json has full_attention_interval {every!r}.")
        kinds = [
            "linear_attention" if (i + 1) % every else "full_attention" for i in range(n_layers)
        ]
    if not isinstance(kinds, list) or len(kinds) != n_layers:
        raise ValueError(f"`layer_types` must list the kind of each of the {n_layers} layers.")
    unknown = sorted(set(kinds) - {"linear_attention", "full_attention"})
    if unknown:
        raise ValueError(
            f"{model_type} config.json has layer_types {', '.join(map(repr, unknown))}; "
            "supported: linear_attention, full_attention."
        )
    return shortest_pattern(tuple(k == "linear_attention" for k in kinds))


def _rotary_fraction(hf: Mapping[str, Any]) -> float:
    params = hf.get("rope_parameters")
    if isinstance(params, Mapping) and "partial_rotary_factor" in params:
        return as_float(params, "partial_rotary_factor")
    return as_float(hf, "partial_rotary_factor", 0.25)


def read(hf: Mapping[str, Any], model_type: str = "qwen3_5_text") -> dict[str, Any]:
    """ModelConfig fields of a Qwen3.5 (dense) text config.json."""
    hf = {**_DEFAULTS, **hf}
    out = _decoder.read(hf, model_type)
    return {
        **out,
        "family": "qwen3_5_text",
        **_decoder.attention_bias(hf),
        "qk_norm": True,
        "norm_unit_offset": True,
        "attention_output_gate": True,
        "rotary_fraction": _rotary_fraction(hf),
        "linear_pattern": _linear_pattern(hf, out["n_layers"], model_type),
        "linear_qk_heads": hf["linear_num_key_heads"],
        "linear_heads": hf["linear_num_value_heads"],
        "linear_key_dim": hf["linear_key_head_dim"],
        "linear_value_dim": hf["linear_value_head_dim"],
        "linear_conv_width": hf["linear_conv_kernel_dim"],
    }


def read_moe(hf: Mapping[str, Any], model_type: str = "qwen3_5_moe_text") -> dict[str, Any]:
    """ModelConfig fields of a Qwen3.5-MoE text config.json: every layer a mixture of experts
    (top-k probabilities renormalised) with a gated shared expert."""
    hf = {**_MOE_DEFAULTS, **hf}
    # No dense layer uses intermediate_size; the shared expert's width stands in for it.
    hf.setdefault("intermediate_size", hf["shared_expert_intermediate_size"])
    return {
        **read(hf, model_type),
        "family": "qwen3_5_moe_text",
        **_experts.read(hf, model_type, required=True),
        "expert_hidden": hf["moe_intermediate_size"],
        "normalize_expert_weights": True,
        "shared_expert_hidden": hf["shared_expert_intermediate_size"],
        "shared_expert_gate": True,
    }


def _text_of(hf: Mapping[str, Any]) -> dict[str, Any]:
    """An image-and-text config.json's ``text_config``, with the top level's special ids and
    tie where it names them."""
    text = dict(hf.get("text_config") or {})
    for name in ("bos_token_id", "eos_token_id", "pad_token_id", "tie_word_embeddings"):
        if name in hf and name not in text:
            text[name] = hf[name]
    for name in ("dtype", "torch_dtype"):
        if name in hf:
            text.setdefault(name, hf[name])
    return text


def read_image_text(hf: Mapping[str, Any]) -> dict[str, Any]:
    """The language model of an image-and-text Qwen3.5 checkpoint (``qwen3_5``)."""
    return read(_text_of(hf), "qwen3_5")


def read_image_text_moe(hf: Mapping[str, Any]) -> dict[str, Any]:
    """The language model of an image-and-text Qwen3.5-MoE checkpoint (``qwen3_5_moe``)."""
    return read_moe(_text_of(hf), "qwen3_5_moe")


def write(c: ModelConfig) -> dict[str, Any]:
    """Qwen3.5's text config.json keys for ``c``."""
    out = _decoder.write(c)
    rope = rope_out(c)
    rope["rope_parameters"] = {
        **rope["rope_parameters"],
        "partial_rotary_factor": c.rotary_fraction,
    }
    return {
        **out,
        **rope,
        "partial_rotary_factor": c.rotary_fraction,
        "attention_bias": c.qkv_bias,
        "layer_types": [
            "linear_attention" if c.layer_linear(i) else "full_attention" for i in range(c.n_layers)
        ],
        "linear_num_key_heads": c.linear_qk_heads,
        "linear_num_value_heads": c.linear_heads,
        "linear_key_head_dim": c.linear_key_dim,
        "linear_value_head_dim": c.linear_value_dim,
        "linear_conv_kernel_dim": c.linear_conv_width,
    }


def write_moe(c: ModelConfig) -> dict[str, Any]:
    """Qwen3.5-MoE's text config.json keys for ``c``."""
    return {
        **write(c),
        "num_experts": c.n_experts,
        "moe_intermediate_size": c.expert_width,
        "shared_expert_intermediate_size": c.shared_expert_hidden,
        **_experts.write(c),
    }


def _conv_in(xs: Sequence[WeightArray]) -> list[WeightArray]:
    # torch's depthwise Conv1d weight [C, 1, W] -> [C, W].
    return [xs[0][:, 0, :]]


def _conv_out(xs: Sequence[WeightArray]) -> list[WeightArray]:
    return [xs[0][:, None, :]]


def layer_rules(config: ModelConfig, layer: int) -> list[Rule]:
    """A layer's tensors: a gated DeltaNet (``linear_attn.*``) or gated attention
    (``self_attn.*``), its MLP or mixture of experts, and the two norms."""
    rules = _decoder.layer_rules(config, layer)
    if config.layer_linear(layer):
        d = "model.layers.{i}.linear_attn."
        rules = [r for r in rules if not r.ours[0].startswith("attn.")]
        rules += [
            one(f"{d}{x}.weight", f"attn.{x}.weight")
            for x in ("in_proj_qkv", "in_proj_z", "in_proj_b", "in_proj_a", "out_proj")
        ]
        rules += [
            Rule((f"{d}conv1d.weight",), ("attn.conv_weight",), _conv_in, _conv_out),
            one(f"{d}dt_bias", "attn.dt_bias"),
            one(f"{d}A_log", "attn.a_log"),
            one(f"{d}norm.weight", "attn.norm.weight"),
        ]
    if not config.layer_moe(layer):
        return rules
    experts = _experts.layer_rules(
        config,
        layer,
        module="mlp",
        router="gate",
        projections=("gate_proj", "up_proj", "down_proj"),
    )
    experts = [r for r in experts if r.ours[0].startswith("mlp.")]
    m = "model.layers.{i}.mlp."
    shared = [
        one(f"{m}shared_expert.{hf}.weight", f"mlp.shared.{ours}.weight")
        for hf, ours in (("gate_proj", "gate"), ("up_proj", "up"), ("down_proj", "down"))
    ]
    shared.append(one(f"{m}shared_expert_gate.weight", "mlp.shared_gate.weight"))
    return [r for r in rules if not r.ours[0].startswith("mlp.")] + experts + shared


#: An image-and-text checkpoint's language model tensors, under :data:`PREFIXES`.
aliases = _decoder.language_model_aliases(PREFIXES)


# The vision tower and the multi-token-prediction head of the published checkpoints.
IGNORABLE = (r"(model\.)?visual\..*", r"mtp\..*")
#: LoRA's default targets: the attention projections and the DeltaNet's q/k/v, gate and output.
LORA_TARGETS = (*ATTENTION_PROJECTIONS, "qkv", "z", "out")


def _base(family: str = "qwen3_5_text", **kw: Any) -> dict[str, Any]:
    return dict(
        family=family,
        vocab_size=248320,
        activation="silu",
        norm_eps=1e-6,
        norm_unit_offset=True,
        head_dim=256,
        max_position=262144,
        rope_theta=10_000_000.0,
        rotary_fraction=0.25,
        qk_norm=True,
        attention_output_gate=True,
        linear_pattern=(True, True, True, False),
        linear_qk_heads=16,
        linear_heads=32,
        linear_key_dim=128,
        linear_value_dim=128,
        linear_conv_width=4,
        **kw,
    )


# Tiny: a pattern of 4 over 6 layers (a tail of two DeltaNets), grouped value heads, unequal
# query/key and value widths, a rotated quarter of a 32-wide head.
_TINY_LINEAR = dict(
    **{**TINY, **TINY_IDS, "n_layers": 6},
    n_kv_heads=2,
    head_dim=32,
    mlp_hidden=128,
    linear_qk_heads=2,
    linear_heads=4,
    linear_key_dim=16,
    linear_value_dim=24,
)


@functools.cache
def presets() -> dict[str, ModelConfig]:
    """Qwen3.5 9B (its language model) and ``qwen3.5-tiny``."""
    return {
        "qwen3.5-9b": ModelConfig(
            **_base(d_model=4096, n_layers=32, n_heads=16, n_kv_heads=4, mlp_hidden=12288)
        ),
        "qwen3.5-tiny": ModelConfig(**{**_base(), **_TINY_LINEAR, "tie_embeddings": True}),
    }


@functools.cache
def moe_presets() -> dict[str, ModelConfig]:
    """Qwen3.5 35B-A3B (its language model) and ``qwen3.5-moe-tiny``."""
    moe = _base(
        "qwen3_5_moe_text",
        normalize_expert_weights=True,
        output_router_logits=True,
        shared_expert_gate=True,
    )
    return {
        "qwen3.5-35b-a3b": ModelConfig(
            **moe,
            d_model=2048,
            n_layers=40,
            n_heads=16,
            n_kv_heads=2,
            mlp_hidden=512,
            n_experts=256,
            experts_per_token=8,
            expert_hidden=512,
            shared_expert_hidden=512,
        ),
        "qwen3.5-moe-tiny": ModelConfig(
            **{**moe, **_TINY_LINEAR, "n_layers": 4},
            n_experts=8,
            experts_per_token=2,
            expert_hidden=32,
            shared_expert_hidden=48,
        ),
    }


DENSE = register(
    _decoder.family(
        "qwen3_5_text",
        "Qwen3_5ForCausalLM",
        read,
        write,
        presets,
        hf_keys=KEYS,
        layer_rules=layer_rules,
        also_reads={"qwen3_5": read_image_text},
        aliases=aliases,
        ignorable=IGNORABLE,
        lora_targets=LORA_TARGETS,
    )
)
MOE = register(
    _decoder.family(
        "qwen3_5_moe_text",
        "Qwen3_5MoeForCausalLM",
        read_moe,
        write_moe,
        moe_presets,
        hf_keys=KEYS,
        layer_rules=layer_rules,
        also_reads={"qwen3_5_moe": read_image_text_moe},
        aliases=aliases,
        ignorable=IGNORABLE,
        lora_targets=LORA_TARGETS,
    )
)
