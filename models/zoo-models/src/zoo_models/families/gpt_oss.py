"""gpt-oss (OpenAI): attention sinks, alternating sliding-window and full layers, YaRN rotary,
attention biases, and a mixture of experts in every layer whose router and experts have biases
and whose SwiGLU is clamped. The released checkpoints store the experts in MXFP4; they are
dequantized on load (:mod:`zoo_models._mxfp4`) and written back unquantized."""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any

from .._config import ModelConfig
from .._hf_fields import layer_types, rope_in, rope_out, window_pattern
from .._hf_weights import Rule, WeightArray, array_module, one
from .._mxfp4 import Mxfp4Tensors
from . import _decoder, _experts
from ._registry import register
from ._tiny import TINY, TINY_IDS

__all__ = ["FAMILY"]

KEYS = {
    **_decoder.KEYS,
    "n_experts": "num_local_experts",
    "experts_per_token": "num_experts_per_tok",
    "expert_hidden": "intermediate_size",
    "swiglu_limit": "swiglu_limit",
    "swiglu_alpha": "swiglu_alpha",
}

# GptOssConfig's defaults (a config.json written by transformers has them all; the released
# ones leave some out).
_DEFAULTS: dict[str, Any] = {
    "num_hidden_layers": 36,
    "num_local_experts": 128,
    "vocab_size": 201088,
    "hidden_size": 2880,
    "intermediate_size": 2880,
    "head_dim": 64,
    "num_attention_heads": 64,
    "num_key_value_heads": 8,
    "sliding_window": 128,
    "max_position_embeddings": 131072,
    "rms_norm_eps": 1e-5,
    "num_experts_per_tok": 4,
    "swiglu_alpha": 1.702,
    "swiglu_limit": 7.0,
    "attention_bias": True,
    "tie_word_embeddings": False,
}
_ROPE: dict[str, Any] = {
    "rope_type": "yarn",
    "rope_theta": 150000.0,
    "factor": 32.0,
    "beta_fast": 32.0,
    "beta_slow": 1.0,
    "truncate": False,
    "original_max_position_embeddings": 4096,
}


def read(hf: Mapping[str, Any]) -> dict[str, Any]:
    """ModelConfig fields of a gpt-oss config.json."""
    hf = {**_DEFAULTS, **hf}
    if not hf.get("rope_parameters") and not hf.get("rope_scaling"):
        hf["rope_parameters"] = {**_ROPE, "rope_theta": hf.get("rope_theta", 150000.0)}
    quant = hf.get("quantization_config")
    if isinstance(quant, Mapping) and quant.get("quant_method") not in (None, "mxfp4"):
        raise ValueError(
            f"gpt_oss config.json has quantization_config.quant_method "
            f"{quant.get('quant_method')!r}; only mxfp4 experts (dequantized on load) are read."
        )
    out = _decoder.read(hf, "gpt_oss")
    n_layers = out["n_layers"]
    kinds = hf.get("layer_types") or [
        "sliding_attention" if (i + 1) % 2 else "full_attention" for i in range(n_layers)
    ]
    pattern = window_pattern({"layer_types": kinds}, n_layers, "gpt_oss")
    window = hf.get("sliding_window")
    local = window is not None and any(pattern)
    bias = bool(hf.get("attention_bias", True))
    return {
        **out,
        **rope_in(hf, "gpt_oss"),
        "sliding_window": window if local else None,
        "window_pattern": pattern if local else (True,),
        "qkv_bias": bias,
        "out_bias": bias,
        "attention_sinks": True,
        **_experts.read(hf, "gpt_oss", required=True),
        "expert_hidden": hf["intermediate_size"],
        "normalize_expert_weights": True,  # softmax over the top-k logits
        "router_bias": True,
        "expert_bias": True,
        "swiglu_limit": float(hf["swiglu_limit"]),
        "swiglu_alpha": float(hf["swiglu_alpha"]),
    }


def write(c: ModelConfig) -> dict[str, Any]:
    """gpt-oss's config.json keys for ``c``."""
    return {
        **_decoder.write(c),
        **rope_out(c),
        "intermediate_size": c.expert_width,
        "attention_bias": c.qkv_bias,
        "sliding_window": c.sliding_window,
        "layer_types": layer_types(c),
        "num_local_experts": c.n_experts,
        "swiglu_limit": c.swiglu_limit,
        "swiglu_alpha": c.swiglu_alpha,
        **_experts.write(c),
    }


def _deinterleave(xs: Sequence[WeightArray]) -> list[WeightArray]:
    # gate_up [..., 2I]: gate in the even columns, up in the odd ones.
    (w,) = xs
    return [w[..., 0::2], w[..., 1::2]]


def _interleave(xs: Sequence[WeightArray]) -> list[WeightArray]:
    gate, up = xs
    pairs = array_module(xs).stack([gate, up], axis=-1)
    return [pairs.reshape(*gate.shape[:-1], 2 * gate.shape[-1])]


def layer_rules(config: ModelConfig, layer: int) -> list[Rule]:
    """A layer's tensors: the Llama-style attention with biases and its sinks, the norms, the
    router with its bias and the experts as 3-D tensors (gate and up interleaved)."""
    rules = [r for r in _decoder.layer_rules(config, layer) if not r.ours[0].startswith("mlp.")]
    rules.append(one("model.layers.{i}.self_attn.sinks", "attn.sinks"))
    p = "model.layers.{i}.mlp."
    rules += [
        one(f"{p}router.weight", "mlp.router.weight"),
        one(f"{p}router.bias", "mlp.router.bias"),
        Rule(
            (f"{p}experts.gate_up_proj",),
            ("mlp.gate_proj", "mlp.up_proj"),
            _deinterleave,
            _interleave,
        ),
        Rule(
            (f"{p}experts.gate_up_proj_bias",),
            ("mlp.gate_bias", "mlp.up_bias"),
            _deinterleave,
            _interleave,
        ),
        one(f"{p}experts.down_proj", "mlp.down_proj"),
        one(f"{p}experts.down_proj_bias", "mlp.down_bias"),
    ]
    return rules


def view(tensors: Mapping[str, Any], config: ModelConfig, source: str) -> Mapping[str, Any]:
    """The released checkpoints' MXFP4 experts (``*_blocks`` and ``*_scales``), dequantized."""
    return Mxfp4Tensors(tensors, source)


def _gpt_oss(**kw: Any) -> ModelConfig:
    base: dict[str, Any] = dict(
        family="gpt_oss",
        vocab_size=201088,
        d_model=2880,
        n_heads=64,
        n_kv_heads=8,
        head_dim=64,
        mlp_hidden=2880,
        expert_hidden=2880,
        experts_per_token=4,
        norm_eps=1e-5,
        max_position=131072,
        rope_theta=150000.0,
        rope_scaling="yarn",
        rope_factor=32.0,
        rope_original_max_position=4096,
        rope_truncate=False,
        sliding_window=128,
        window_pattern=(True, False),
        qkv_bias=True,
        out_bias=True,
        attention_sinks=True,
        normalize_expert_weights=True,
        router_bias=True,
        expert_bias=True,
        swiglu_limit=7.0,
        swiglu_alpha=1.702,
        eos_token_id=200002,
        extra_eos_token_ids=(199999, 200012),
        pad_token_id=199999,
    )
    return ModelConfig(**{**base, **kw})


@functools.cache
def presets() -> dict[str, ModelConfig]:
    """gpt-oss-20b, gpt-oss-120b and ``gpt-oss-tiny``."""
    return {
        "gpt-oss-20b": _gpt_oss(n_layers=24, n_experts=32),
        "gpt-oss-120b": _gpt_oss(n_layers=36, n_experts=128),
        # Sliding and full layers alternating, 8 experts top 2, YaRN over a context of 32.
        "gpt-oss-tiny": _gpt_oss(
            **{**TINY, **TINY_IDS, "n_layers": 4},
            n_kv_heads=2,
            head_dim=16,
            mlp_hidden=32,
            expert_hidden=32,
            n_experts=8,
            experts_per_token=2,
            sliding_window=8,
            rope_theta=10000.0,
            rope_factor=4.0,
            rope_original_max_position=32,
            extra_eos_token_ids=(),
        ),
    }


FAMILY = register(
    _decoder.family(
        "gpt_oss",
        "GptOssForCausalLM",
        read,
        write,
        presets,
        hf_keys=KEYS,
        layer_rules=layer_rules,
        view=view,
    )
)
