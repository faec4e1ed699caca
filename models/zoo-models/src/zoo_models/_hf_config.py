"""Hugging Face ``config.json`` ↔ :class:`ModelConfig`, per family.

Reading accepts both the current layout (``rope_parameters``) and the older one (``rope_theta``
plus ``rope_scaling``); writing emits both, so old and new ``transformers`` read the result.
A ModelConfig that a family's Hugging Face config cannot express (say a Llama with a sliding
window) is refused on writing, naming the fields, rather than silently changed.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping
from typing import Any

from ._config import ModelConfig

__all__ = ["SUPPORTED_MODEL_TYPES", "from_hf_config", "to_hf_config"]

_ARCHITECTURES = {
    "gpt2": "GPT2LMHeadModel",
    "llama": "LlamaForCausalLM",
    "mistral": "MistralForCausalLM",
    "qwen2": "Qwen2ForCausalLM",
    "gemma2": "Gemma2ForCausalLM",
    "qwen3": "Qwen3ForCausalLM",
    "gemma3_text": "Gemma3ForCausalLM",
    "olmo2": "Olmo2ForCausalLM",
    "mixtral": "MixtralForCausalLM",
    "qwen3_moe": "Qwen3MoeForCausalLM",
}
# `gemma3` (image and text) is read for its language model, which is written as gemma3_text.
SUPPORTED_MODEL_TYPES: tuple[str, ...] = (*_ARCHITECTURES, "gemma3")

# Hugging Face activation names → ours, and ours → the name each family writes.
_ACT_IN = {
    "gelu": "gelu",
    "gelu_new": "gelu_tanh",
    "gelu_pytorch_tanh": "gelu_tanh",
    "gelu_fast": "gelu_tanh",
    "silu": "silu",
    "swish": "silu",
    "relu": "relu",
}
_ACT_OUT_GPT2 = {"gelu": "gelu", "gelu_tanh": "gelu_new", "silu": "silu", "relu": "relu"}
_ACT_OUT = {"gelu": "gelu", "gelu_tanh": "gelu_pytorch_tanh", "silu": "silu", "relu": "relu"}

# Fields that describe how a model runs here, not what it computes; a load may set them.
RUNTIME_FIELDS = (
    "dropout",
    "init_std",
    "param_dtype",
    "compute_dtype",
    "remat",
    "scan_layers",
    "attention_implementation",
    "router_aux_loss_coef",
    "output_router_logits",
)


# Each family's config.json key for the ModelConfig fields it sets, so that a bad value is
# reported under the name the user sees in the file.
_LLAMA_KEYS = {
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
_HF_KEYS: dict[str, dict[str, str]] = {
    "gpt2": {
        "d_model": "n_embd",
        "n_layers": "n_layer",
        "n_heads": "n_head",
        "mlp_hidden": "n_inner",
        "max_position": "n_positions",
        "norm_eps": "layer_norm_epsilon",
        "activation": "activation_function",
    },
    "llama": _LLAMA_KEYS,
    "mistral": _LLAMA_KEYS,
    "qwen2": _LLAMA_KEYS,
    "gemma2": {**_LLAMA_KEYS, "activation": "hidden_activation"},
    "gemma3_text": {**_LLAMA_KEYS, "activation": "hidden_activation"},
    "mixtral": {
        **_LLAMA_KEYS,
        "n_experts": "num_local_experts",
        "experts_per_token": "num_experts_per_tok",
    },
    "qwen3_moe": {
        **_LLAMA_KEYS,
        "n_experts": "num_experts",
        "experts_per_token": "num_experts_per_tok",
        "expert_hidden": "moe_intermediate_size",
    },
}


def _hf_names(message: str, model_type: str) -> str:
    """``message`` with each `ModelConfig field` in backticks renamed to its config.json key."""
    keys = _HF_KEYS.get(model_type, _LLAMA_KEYS)  # the Llama-like families share its keys
    return re.sub(r"`(\w+)`", lambda m: f"`{keys.get(m.group(1), m.group(1))}`", message)


def _float(hf: Mapping[str, Any], key: str, default: float | None = None) -> float:
    value = hf.get(key, default)
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ValueError(f"`{key}` must be a number, got {value!r}.") from None


def _activation(name: object, model_type: str) -> str:
    if name not in _ACT_IN:
        raise ValueError(
            f"unsupported `activation` {name!r} for {model_type}; supported: {', '.join(_ACT_IN)}."
        )
    return _ACT_IN[name]  # type: ignore[index]


def _ids(value: object) -> list[int]:
    # eos_token_id may be a list (several stop tokens).
    if value is None:
        return []
    return [int(v) for v in value] if isinstance(value, list) else [int(value)]  # type: ignore[call-overload]


def _special_ids(hf: Mapping[str, Any]) -> dict[str, Any]:
    # transformers only warns about ids outside the vocabulary; such an id names no token,
    # so it is dropped rather than failing the load.
    vocab = hf.get("vocab_size")
    out: dict[str, Any] = {}
    for name in ("bos_token_id", "eos_token_id", "pad_token_id"):
        ids = [i for i in _ids(hf.get(name)) if vocab is None or 0 <= i < vocab]
        out[name] = ids[0] if ids else None
        if name == "eos_token_id":
            out["extra_eos_token_ids"] = tuple(dict.fromkeys(ids[1:]))
    return out


def _rope(hf: Mapping[str, Any], model_type: str) -> dict[str, Any]:
    params = hf.get("rope_parameters")
    if not isinstance(params, Mapping):
        # Older layout: rope_theta at the top level, rope_scaling with "type" or "rope_type".
        params = dict(hf.get("rope_scaling") or {})
        params.setdefault("rope_theta", hf.get("rope_theta", 10000.0))
    kind = params.get("rope_type", params.get("type", "default"))
    out: dict[str, Any] = {"rope_theta": _float(params, "rope_theta", 10000.0)}
    if kind == "default":
        return out
    if kind == "linear":
        return {**out, "rope_scaling": "linear", "rope_factor": _float(params, "factor")}
    if kind == "llama3":
        original = params.get("original_max_position_embeddings")
        return {
            **out,
            "rope_scaling": "llama3",
            "rope_factor": _float(params, "factor"),
            "rope_low_freq_factor": _float(params, "low_freq_factor"),
            "rope_high_freq_factor": _float(params, "high_freq_factor"),
            "rope_original_max_position": original,
        }
    raise ValueError(
        f"unsupported rope type {kind!r} for {model_type}; supported: default, linear, llama3."
    )


def _rope_out(config: ModelConfig) -> dict[str, Any]:
    params: dict[str, Any] = {"rope_theta": config.rope_theta, "rope_type": "default"}
    if config.rope_scaling == "linear":
        params = {**params, "rope_type": "linear", "factor": config.rope_factor}
    elif config.rope_scaling == "llama3":
        params = {
            **params,
            "rope_type": "llama3",
            "factor": config.rope_factor,
            "low_freq_factor": config.rope_low_freq_factor,
            "high_freq_factor": config.rope_high_freq_factor,
            "original_max_position_embeddings": config.rope_original_max_position,
        }
    legacy = {k: v for k, v in params.items() if k != "rope_theta"}
    return {
        "rope_parameters": params,
        "rope_theta": config.rope_theta,
        "rope_scaling": None if config.rope_scaling == "none" else legacy,
    }


def _window_pattern(hf: Mapping[str, Any], n_layers: int, model_type: str) -> tuple[bool, ...]:
    """The shortest pattern that ``layer_types`` repeats (True = sliding window layer); the last
    repetition may be cut short (Gemma 3's 26 layers repeat five local and one global)."""
    layer_types = hf.get("layer_types")
    if layer_types is None:
        return (True,)
    if len(layer_types) != n_layers:
        raise ValueError(
            f"`layer_types` lists {len(layer_types)} layers, `n_layers` {n_layers}; make them agree."
        )
    unknown = sorted(set(layer_types) - {"sliding_attention", "full_attention"})
    if unknown:
        raise ValueError(
            f"{model_type} config.json has layer_types {', '.join(map(repr, unknown))}; "
            "supported: sliding_attention, full_attention."
        )
    local = tuple(t == "sliding_attention" for t in layer_types)
    for period in range(1, n_layers + 1):
        if all(local[i] == local[i % period] for i in range(n_layers)):
            return local[:period]
    raise AssertionError("unreachable: the full pattern always repeats")


def _qwen_sliding(hf: Mapping[str, Any], n_layers: int, model_type: str) -> dict[str, Any]:
    """Qwen's sliding window: ``use_sliding_window``, on the layers ``layer_types`` names (or
    from ``max_window_layers`` on, 28 by default, as transformers reads it)."""
    window = hf.get("sliding_window") if hf.get("use_sliding_window", False) else None
    if window is None:
        return {}
    layer_types = hf.get("layer_types")
    if layer_types is None:
        first = hf.get("max_window_layers", 28)
        layer_types = [
            "sliding_attention" if i >= first else "full_attention" for i in range(n_layers)
        ]
    pattern = _window_pattern({"layer_types": layer_types}, n_layers, model_type)
    return {"sliding_window": window, "window_pattern": pattern} if any(pattern) else {}


def _layer_types(config: ModelConfig) -> list[str]:
    return [
        "sliding_attention" if config.layer_window(i) is not None else "full_attention"
        for i in range(config.n_layers)
    ]


def _require(hf: Mapping[str, Any], model_type: str, *names: str) -> None:
    missing = [n for n in names if hf.get(n) is None]
    if missing:
        raise ValueError(f"no {', '.join(missing)}, which a {model_type} config.json needs.")


# --- reading -------------------------------------------------------------------------------


def _gpt2_in(hf: Mapping[str, Any]) -> dict[str, Any]:
    _require(hf, "gpt2", "vocab_size", "n_embd", "n_layer", "n_head", "n_positions")
    if hf.get("scale_attn_by_inverse_layer_idx"):
        raise ValueError("scale_attn_by_inverse_layer_idx is set, which is not supported.")
    if hf.get("scale_attn_weights", True) is False:
        raise ValueError("scale_attn_weights is false, which is not supported.")
    return {
        "family": "gpt2",
        "vocab_size": hf["vocab_size"],
        "d_model": hf["n_embd"],
        "n_layers": hf["n_layer"],
        "n_heads": hf["n_head"],
        "mlp_hidden": hf.get("n_inner") or 4 * hf["n_embd"],
        "activation": _activation(hf.get("activation_function", "gelu_new"), "gpt2"),
        "mlp_gated": False,
        "norm": "layernorm",
        "norm_eps": _float(hf, "layer_norm_epsilon", 1e-5),
        "positional": "learned",
        "max_position": hf["n_positions"],
        "tie_embeddings": bool(hf.get("tie_word_embeddings", True)),
        "qkv_bias": True,
        "out_bias": True,
        "mlp_bias": True,
        **_special_ids(hf),
    }


def _llama_like_in(hf: Mapping[str, Any], model_type: str) -> dict[str, Any]:
    _require(
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
        "activation": _activation(hf.get("hidden_act", "silu"), model_type),
        "mlp_gated": True,
        "norm": "rmsnorm",
        "norm_eps": _float(hf, "rms_norm_eps", 1e-6),
        "positional": "rope",
        "max_position": hf.get("max_position_embeddings", 2048),
        "tie_embeddings": bool(hf.get("tie_word_embeddings", False)),
        **_rope(hf, model_type),
        **_special_ids(hf),
    }


def _llama_in(hf: Mapping[str, Any]) -> dict[str, Any]:
    bias = bool(hf.get("attention_bias", False))
    return {
        **_llama_like_in(hf, "llama"),
        "qkv_bias": bias,
        "out_bias": bias,
        "mlp_bias": bool(hf.get("mlp_bias", False)),
    }


def _mistral_in(hf: Mapping[str, Any]) -> dict[str, Any]:
    return {**_llama_like_in(hf, "mistral"), "sliding_window": hf.get("sliding_window")}


def _qwen2_in(hf: Mapping[str, Any]) -> dict[str, Any]:
    out = {**_llama_like_in(hf, "qwen2"), "qkv_bias": True}
    return {**out, **_qwen_sliding(hf, out["n_layers"], "qwen2")}


def _qwen3_in(hf: Mapping[str, Any]) -> dict[str, Any]:
    # transformers' Qwen3 default head_dim is 128, whatever hidden_size / heads is.
    out = _llama_like_in({"head_dim": 128, **hf}, "qwen3")
    bias = bool(hf.get("attention_bias", False))
    return {
        **out,
        **_qwen_sliding(hf, out["n_layers"], "qwen3"),
        "qkv_bias": bias,
        "out_bias": bias,
        "qk_norm": True,
    }


def _olmo2_in(hf: Mapping[str, Any]) -> dict[str, Any]:
    bias = bool(hf.get("attention_bias", False))
    return {
        **_llama_like_in({"rms_norm_eps": 1e-5, **hf}, "olmo2"),
        "qkv_bias": bias,
        "out_bias": bias,
        "qk_norm": "projection",
        "pre_norms": False,
        "post_norms": True,
    }


def _gemma2_in(hf: Mapping[str, Any]) -> dict[str, Any]:
    out = _llama_like_in(
        {**hf, "hidden_act": hf.get("hidden_activation", "gelu_pytorch_tanh")}, "gemma2"
    )
    n_layers = out["n_layers"]
    layer_types = hf.get("layer_types") or [
        "sliding_attention" if i % 2 == 0 else "full_attention" for i in range(n_layers)
    ]
    pattern = _window_pattern({"layer_types": layer_types}, n_layers, "gemma2")
    window = hf.get("sliding_window")
    bias = bool(hf.get("attention_bias", False))
    return {
        **out,
        "tie_embeddings": bool(hf.get("tie_word_embeddings", True)),
        "norm_unit_offset": True,
        "qkv_bias": bias,
        "out_bias": bias,
        "sliding_window": window if window is not None and any(pattern) else None,
        "window_pattern": pattern if window is not None and any(pattern) else (True,),
        "attn_logit_soft_cap": hf.get("attn_logit_softcapping"),
        "final_logit_soft_cap": hf.get("final_logit_softcapping"),
        "query_pre_attn_scalar": _float(hf, "query_pre_attn_scalar", 256),
        "embedding_scale": True,
        "post_norms": True,
    }


# Gemma3TextConfig's defaults: the published multimodal checkpoints write only what differs.
_GEMMA3_DEFAULTS: dict[str, Any] = {
    "vocab_size": 262208,
    "hidden_size": 2304,
    "intermediate_size": 9216,
    "num_hidden_layers": 26,
    "num_attention_heads": 8,
    "num_key_value_heads": 4,
    "head_dim": 256,
    "hidden_activation": "gelu_pytorch_tanh",
    "max_position_embeddings": 131072,
    "rms_norm_eps": 1e-6,
    "query_pre_attn_scalar": 256,
    "sliding_window": 4096,
    "bos_token_id": 2,
    "eos_token_id": 1,
    "pad_token_id": 0,
    "tie_word_embeddings": True,
}


def _gemma3_rope(hf: Mapping[str, Any]) -> dict[str, Any]:
    """Global layers' rotary base and scaling, and the local layers' base."""
    params = hf.get("rope_parameters")
    if isinstance(params, Mapping) and (
        "full_attention" in params or "sliding_attention" in params
    ):
        # transformers 5: one set of parameters per layer type.
        full = params.get("full_attention") or {}
        local = params.get("sliding_attention") or {}
        out = _rope({"rope_parameters": {"rope_theta": 1e6, **full}}, "gemma3_text")
        kind = local.get("rope_type", local.get("type", "default"))
        if kind != "default":
            raise ValueError(
                f"gemma3_text config.json has rope type {kind!r} on its sliding_attention "
                "layers; supported there: default."
            )
        return {**out, "rope_local_theta": float(local.get("rope_theta", 10000.0))}
    # Older layout: rope_theta and rope_scaling for the global layers, rope_local_base_freq.
    older = {"rope_theta": hf.get("rope_theta", 1e6), "rope_scaling": hf.get("rope_scaling")}
    return {
        **_rope(older, "gemma3_text"),
        "rope_local_theta": float(hf.get("rope_local_base_freq", 10000.0)),
    }


def _gemma3_text_in(hf: Mapping[str, Any]) -> dict[str, Any]:
    hf = {**_GEMMA3_DEFAULTS, **hf}
    if hf.get("use_bidirectional_attention"):
        raise ValueError(
            "gemma3_text config.json sets use_bidirectional_attention, which is not supported."
        )
    out = _llama_like_in({**hf, "hidden_act": hf["hidden_activation"]}, "gemma3_text")
    n_layers = out["n_layers"]
    layer_types = hf.get("layer_types")
    if layer_types is None:
        every = hf.get("sliding_window_pattern", hf.get("_sliding_window_pattern", 6))
        layer_types = [
            "sliding_attention" if (i + 1) % every else "full_attention" for i in range(n_layers)
        ]
    pattern = _window_pattern({"layer_types": layer_types}, n_layers, "gemma3_text")
    window = hf.get("sliding_window")
    local = window is not None and any(pattern)
    bias = bool(hf.get("attention_bias", False))
    return {
        **out,
        **_gemma3_rope(hf),
        "tie_embeddings": bool(hf["tie_word_embeddings"]),
        "norm_unit_offset": True,
        "qkv_bias": bias,
        "out_bias": bias,
        "qk_norm": True,
        "sliding_window": window if local else None,
        "window_pattern": pattern if local else (True,),
        "attn_logit_soft_cap": hf.get("attn_logit_softcapping"),
        "final_logit_soft_cap": hf.get("final_logit_softcapping"),
        "query_pre_attn_scalar": float(hf["query_pre_attn_scalar"]),
        "embedding_scale": True,
        "post_norms": True,
    }


def _gemma3_in(hf: Mapping[str, Any]) -> dict[str, Any]:
    """The language model of an image-and-text Gemma 3 checkpoint (``text_config``)."""
    text = dict(hf.get("text_config") or {})
    # The top level may name the special ids and the tie (it does in the published ones).
    for name in ("bos_token_id", "eos_token_id", "pad_token_id", "tie_word_embeddings"):
        if name in hf:
            text[name] = hf[name]
    return _gemma3_text_in(text)


def _experts_in(hf: Mapping[str, Any], model_type: str, *, required: bool) -> dict[str, Any]:
    """The expert count and top-k (refused where the layer cannot have them), and the
    load-balancing settings."""
    count_key = "num_local_experts" if "num_local_experts" in hf else "num_experts"
    n, k = hf.get(count_key), hf.get("num_experts_per_tok")
    if not isinstance(n, int) or isinstance(n, bool) or n < (1 if required else 0):
        raise ValueError(
            f"{model_type} config.json has {count_key} {n!r}; a mixture of experts needs a "
            f"whole number of experts{', at least 1' if required else ''}."
        )
    if n and (not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= n):
        raise ValueError(
            f"{model_type} config.json has num_experts_per_tok {k!r} for {n} experts "
            f"({count_key}); each token needs between 1 and {n} experts."
        )
    return {
        "n_experts": n,
        "experts_per_token": k if n else 2,
        "router_aux_loss_coef": float(hf.get("router_aux_loss_coef", 0.001)),
        "output_router_logits": bool(hf.get("output_router_logits", False)),
    }


# MixtralConfig's defaults that differ from the Llama-like reader's.
_MIXTRAL_DEFAULTS: dict[str, Any] = {
    "rope_theta": 1e6,
    "max_position_embeddings": 4096 * 32,
    "rms_norm_eps": 1e-5,
    "num_local_experts": 8,
    "num_experts_per_tok": 2,
}


def _mixtral_in(hf: Mapping[str, Any]) -> dict[str, Any]:
    hf = {**_MIXTRAL_DEFAULTS, **hf}
    if hf.get("router_jitter_noise"):
        raise ValueError(
            f"mixtral config.json sets router_jitter_noise {hf['router_jitter_noise']!r}, which "
            "is not supported; set it to 0."
        )
    return {
        **_llama_like_in(hf, "mixtral"),
        "sliding_window": hf.get("sliding_window"),
        **_experts_in(hf, "mixtral", required=True),
        "normalize_expert_weights": True,
    }


def _qwen3_moe_in(hf: Mapping[str, Any]) -> dict[str, Any]:
    hf = {"num_experts": 128, "num_experts_per_tok": 8, "moe_intermediate_size": 768, **hf}
    out = _llama_like_in(hf, "qwen3_moe")
    bias = bool(hf.get("attention_bias", False))
    step, dense = hf.get("decoder_sparse_step", 1), hf.get("mlp_only_layers") or []
    if not isinstance(step, int) or step < 1:
        raise ValueError(
            f"qwen3_moe config.json has decoder_sparse_step {step!r}; it must be >= 1."
        )
    window = hf.get("sliding_window") if hf.get("use_sliding_window", False) else None
    return {
        **out,
        "qkv_bias": bias,
        "out_bias": bias,
        "qk_norm": True,
        "sliding_window": window,
        **_experts_in(hf, "qwen3_moe", required=False),
        "expert_hidden": hf["moe_intermediate_size"],
        "normalize_expert_weights": bool(hf.get("norm_topk_prob", False)),
        "moe_every": step,
        "dense_layers": tuple(int(i) for i in dense),
    }


_READERS: dict[str, Callable[[Mapping[str, Any]], dict[str, Any]]] = {
    "gpt2": _gpt2_in,
    "llama": _llama_in,
    "mistral": _mistral_in,
    "qwen2": _qwen2_in,
    "gemma2": _gemma2_in,
    "qwen3": _qwen3_in,
    "gemma3_text": _gemma3_text_in,
    "gemma3": _gemma3_in,
    "olmo2": _olmo2_in,
    "mixtral": _mixtral_in,
    "qwen3_moe": _qwen3_moe_in,
}


def checkpoint_dtype(hf: Mapping[str, Any]) -> str | None:
    """The parameter dtype a config.json declares (``dtype``, or the older ``torch_dtype``)."""
    dtype = hf.get("dtype", hf.get("torch_dtype"))
    return dtype if dtype in ("float32", "bfloat16", "float16", "float64") else None


def from_hf_config(
    hf: Mapping[str, Any], *, source: str = "config.json", **changes: Any
) -> ModelConfig:
    """A :class:`ModelConfig` from a parsed Hugging Face ``config.json``.

    ``changes`` set runtime fields (``param_dtype``, ``compute_dtype``, ``remat``,
    ``attention_implementation``, ``dropout``, ``init_std``). A value the model cannot have
    raises ``ValueError`` naming ``source`` and the key as config.json spells it
    (``hidden_size``, not ``d_model``).
    """
    model_type = hf.get("model_type")
    if model_type not in _READERS:
        raise ValueError(
            f"{source} has model_type {model_type!r}; supported model types: "
            f"{', '.join(SUPPORTED_MODEL_TYPES)}."
        )
    bad = sorted(set(changes) - set(RUNTIME_FIELDS))
    if bad:
        raise ValueError(
            f"cannot override {', '.join(bad)} when loading; only {', '.join(RUNTIME_FIELDS)}."
        )
    try:
        fields = _READERS[model_type](hf)
        dtype = checkpoint_dtype(hf)
        if dtype is not None:
            fields["param_dtype"] = dtype
        config = ModelConfig(**fields)
    except (ValueError, TypeError) as e:
        # Reported under config.json's names (hidden_size), not the ModelConfig's (d_model).
        raise ValueError(f"{source}: {_hf_names(str(e), model_type)}") from None
    return config.replace(**changes) if changes else config


# --- writing -------------------------------------------------------------------------------


def _gpt2_out(c: ModelConfig) -> dict[str, Any]:
    return {
        "vocab_size": c.vocab_size,
        "n_embd": c.d_model,
        "n_layer": c.n_layers,
        "n_head": c.n_heads,
        "n_inner": c.mlp_hidden,
        "n_positions": c.max_position,
        "activation_function": _ACT_OUT_GPT2[c.activation],
        "layer_norm_epsilon": c.norm_eps,
        "scale_attn_weights": True,
        "scale_attn_by_inverse_layer_idx": False,
        "reorder_and_upcast_attn": False,
        # Inference checkpoints: dropout off unless the config says otherwise.
        "attn_pdrop": c.dropout,
        "embd_pdrop": c.dropout,
        "resid_pdrop": c.dropout,
    }


def _llama_like_out(c: ModelConfig) -> dict[str, Any]:
    return {
        "vocab_size": c.vocab_size,
        "hidden_size": c.d_model,
        "intermediate_size": c.mlp_hidden,
        "num_hidden_layers": c.n_layers,
        "num_attention_heads": c.n_heads,
        "num_key_value_heads": c.kv_heads,
        "head_dim": c.dim_per_head,
        "hidden_act": _ACT_OUT[c.activation],
        "max_position_embeddings": c.max_position,
        "rms_norm_eps": c.norm_eps,
        "attention_dropout": 0.0,
        **_rope_out(c),
    }


def _llama_out(c: ModelConfig) -> dict[str, Any]:
    return {**_llama_like_out(c), "attention_bias": c.qkv_bias, "mlp_bias": c.mlp_bias}


def _mistral_out(c: ModelConfig) -> dict[str, Any]:
    return {**_llama_like_out(c), "sliding_window": c.sliding_window}


def _qwen2_out(c: ModelConfig) -> dict[str, Any]:
    window = c.sliding_window is not None
    return {
        **_llama_like_out(c),
        "use_sliding_window": window,
        "sliding_window": c.sliding_window,
        "max_window_layers": c.n_layers,
        "layer_types": _layer_types(c),
    }


def _qwen3_out(c: ModelConfig) -> dict[str, Any]:
    return {**_qwen2_out(c), "attention_bias": c.qkv_bias}


def _olmo2_out(c: ModelConfig) -> dict[str, Any]:
    return {**_llama_like_out(c), "attention_bias": c.qkv_bias}


def _gemma3_text_out(c: ModelConfig) -> dict[str, Any]:
    out = _gemma2_out(c)
    local = c.rope_theta if c.rope_local_theta is None else c.rope_local_theta
    full = out["rope_parameters"]
    return {
        **out,
        # Per layer type (transformers 5), and the older keys beside it.
        "rope_parameters": {
            "full_attention": full,
            "sliding_attention": {"rope_type": "default", "rope_theta": local},
        },
        "rope_local_base_freq": local,
        "use_bidirectional_attention": False,
    }


def _gemma2_out(c: ModelConfig) -> dict[str, Any]:
    out = _llama_like_out(c)
    out["hidden_activation"] = out.pop("hidden_act")
    return {
        **out,
        "attention_bias": c.qkv_bias,
        "sliding_window": c.sliding_window,
        "layer_types": _layer_types(c),
        "attn_logit_softcapping": c.attn_logit_soft_cap,
        "final_logit_softcapping": c.final_logit_soft_cap,
        "query_pre_attn_scalar": _number(
            c.dim_per_head if c.query_pre_attn_scalar is None else c.query_pre_attn_scalar
        ),
    }


def _experts_out(c: ModelConfig) -> dict[str, Any]:
    return {
        "num_experts_per_tok": c.experts_per_token,
        "router_aux_loss_coef": c.router_aux_loss_coef,
        "output_router_logits": c.output_router_logits,
    }


def _mixtral_out(c: ModelConfig) -> dict[str, Any]:
    return {
        **_llama_like_out(c),
        "intermediate_size": c.expert_width,
        "sliding_window": c.sliding_window,
        "num_local_experts": c.n_experts,
        "router_jitter_noise": 0.0,
        **_experts_out(c),
    }


def _qwen3_moe_out(c: ModelConfig) -> dict[str, Any]:
    return {
        **_llama_like_out(c),
        "attention_bias": c.qkv_bias,
        "use_sliding_window": c.sliding_window is not None,
        "sliding_window": c.sliding_window,
        "num_experts": c.n_experts,
        "moe_intermediate_size": c.expert_width,
        "norm_topk_prob": c.normalize_expert_weights,
        "decoder_sparse_step": c.moe_every,
        "mlp_only_layers": list(c.dense_layers),
        **_experts_out(c),
    }


def _number(x: float) -> int | float:
    # transformers declares some float-valued fields as int; write integral values as ints.
    return int(x) if float(x).is_integer() else float(x)


_WRITERS: dict[str, Callable[[ModelConfig], dict[str, Any]]] = {
    "gpt2": _gpt2_out,
    "llama": _llama_out,
    "mistral": _mistral_out,
    "qwen2": _qwen2_out,
    "gemma2": _gemma2_out,
    "qwen3": _qwen3_out,
    "gemma3_text": _gemma3_text_out,
    "olmo2": _olmo2_out,
    "mixtral": _mixtral_out,
    "qwen3_moe": _qwen3_moe_out,
}


def _semantics(config: ModelConfig) -> dict[str, Any]:
    """What the architecture computes, with equivalent spellings resolved to one value."""
    out = {
        f.name: getattr(config, f.name)
        for f in dataclasses.fields(config)
        if f.name not in RUNTIME_FIELDS
    }
    for name in (
        "n_kv_heads",
        "head_dim",
        "sliding_window",
        "window_pattern",
        "query_pre_attn_scalar",
        "rope_local_theta",
    ):
        del out[name]
    out["kv_heads"] = config.kv_heads
    out["dim_per_head"] = config.dim_per_head
    out["layer_windows"] = [config.layer_window(i) for i in range(config.n_layers)]
    out["attention_scale"] = config.attention_scale
    rope = ("rope_theta", "rope_factor", "rope_low_freq_factor", "rope_high_freq_factor")
    rope += ("rope_original_max_position", "rope_scaling")
    unused: tuple[str, ...] = ()
    if config.positional == "learned":
        unused = rope
    elif config.rope_scaling == "none":
        unused = rope[1:5]
    elif config.rope_scaling == "linear":
        unused = rope[2:5]
    unused += ("norm_bias",) if config.norm == "rmsnorm" else ("norm_unit_offset",)
    for name in unused:
        del out[name]
    experts = ("n_experts", "experts_per_token", "expert_hidden", "normalize_expert_weights")
    for name in (*experts, "moe_every", "dense_layers"):
        del out[name]
    if config.n_experts:
        out["experts"] = (config.n_experts, config.experts_per_token, config.expert_width)
        out["expert_weights_normalized"] = config.normalize_expert_weights
        out["moe_layers"] = config.moe_layers
        if len(config.moe_layers) == config.n_layers:
            del out["mlp_hidden"]  # no dense MLP uses it
    local = [i for i in range(config.period) if config.layer_window(i) is not None]
    if config.positional == "rope" and local:
        # The sliding-window layers' base, and whether they share the global layers' scaling.
        theta, scaling = config.layer_rope(local[0])
        out["local_rope"] = (theta, scaling.kind)
    return out


# Derived keys of _semantics, reported as the ModelConfig fields that set them.
_SOURCES = {
    "kv_heads": ("n_kv_heads",),
    "dim_per_head": ("head_dim",),
    "layer_windows": ("sliding_window", "window_pattern"),
    "attention_scale": ("query_pre_attn_scalar",),
    "local_rope": ("rope_local_theta", "rope_theta", "rope_scaling"),
    "experts": ("n_experts", "experts_per_token", "expert_hidden"),
    "expert_weights_normalized": ("normalize_expert_weights",),
    "moe_layers": ("moe_every", "dense_layers"),
}


def _describe(config: ModelConfig, key: str) -> str:
    return ", ".join(f"{f}={getattr(config, f)!r}" for f in _SOURCES.get(key, (key,)))


def to_hf_config(config: ModelConfig) -> dict[str, Any]:
    """The Hugging Face ``config.json`` content for ``config``.

    Raises ``ValueError`` naming the fields the family's Hugging Face config cannot express.
    """
    eos = list(config.eos_token_ids)
    hf: dict[str, Any] = {
        "model_type": config.family,
        "architectures": [_ARCHITECTURES[config.family]],
        **_WRITERS[config.family](config),
        "tie_word_embeddings": config.tie_embeddings,
        "bos_token_id": config.bos_token_id,
        # Every stop id the checkpoint named: a list when there are several.
        "eos_token_id": eos if len(eos) > 1 else config.eos_token_id,
        "pad_token_id": config.pad_token_id,
        "dtype": config.param_dtype,
        "use_cache": True,
    }
    # Read it back: whatever differs is something this family cannot represent.
    back = _semantics(from_hf_config(hf))
    want = _semantics(config)
    diff = [_describe(config, k) for k in want if want[k] != back.get(k)]
    if diff:
        raise ValueError(
            f"a Hugging Face {config.family} config cannot express {', '.join(diff)}; "
            "change these fields or pick a family that has them."
        )
    return hf
