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
}
SUPPORTED_MODEL_TYPES: tuple[str, ...] = tuple(_ARCHITECTURES)

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
}


def _hf_names(message: str, model_type: str) -> str:
    """``message`` with each `ModelConfig field` in backticks renamed to its config.json key."""
    keys = _HF_KEYS[model_type]
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


def _first_id(value: object) -> int | None:
    # eos_token_id may be a list (several stop tokens); ModelConfig keeps the first.
    if isinstance(value, list):
        return int(value[0]) if value else None
    return None if value is None else int(value)  # type: ignore[call-overload]


def _special_ids(hf: Mapping[str, Any]) -> dict[str, int | None]:
    # transformers only warns about ids outside the vocabulary; such an id names no token,
    # so it is dropped rather than failing the load.
    vocab = hf.get("vocab_size")
    out = {}
    for name in ("bos_token_id", "eos_token_id", "pad_token_id"):
        value = _first_id(hf.get(name))
        out[name] = value if value is None or vocab is None or 0 <= value < vocab else None
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
    """The shortest repeating pattern of ``layer_types`` (True = sliding window layer)."""
    layer_types = hf.get("layer_types")
    if layer_types is None:
        return (True,)
    if len(layer_types) != n_layers:
        raise ValueError(
            f"`layer_types` lists {len(layer_types)} layers, `n_layers` {n_layers}; make them agree."
        )
    local = tuple(t == "sliding_attention" for t in layer_types)
    for period in range(1, n_layers + 1):
        if n_layers % period == 0 and local == local[:period] * (n_layers // period):
            return local[:period]
    raise AssertionError("unreachable: the full pattern always repeats")


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
    window = hf.get("sliding_window") if hf.get("use_sliding_window", False) else None
    if window is not None:
        if hf.get("layer_types") is not None:
            pattern = _window_pattern(hf, out["n_layers"], "qwen2")
        else:
            first = hf.get("max_window_layers", out["n_layers"])
            pattern = tuple(i >= first for i in range(out["n_layers"]))
            pattern = _window_pattern(
                {"layer_types": ["sliding_attention" if p else "full_attention" for p in pattern]},
                out["n_layers"],
                "qwen2",
            )
        if any(pattern):
            out = {**out, "sliding_window": window, "window_pattern": pattern}
    return out


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


_READERS: dict[str, Callable[[Mapping[str, Any]], dict[str, Any]]] = {
    "gpt2": _gpt2_in,
    "llama": _llama_in,
    "mistral": _mistral_in,
    "qwen2": _qwen2_in,
    "gemma2": _gemma2_in,
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


def _number(x: float) -> int | float:
    # transformers declares some float-valued fields as int; write integral values as ints.
    return int(x) if float(x).is_integer() else float(x)


_WRITERS: dict[str, Callable[[ModelConfig], dict[str, Any]]] = {
    "gpt2": _gpt2_out,
    "llama": _llama_out,
    "mistral": _mistral_out,
    "qwen2": _qwen2_out,
    "gemma2": _gemma2_out,
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
    return out


# Derived keys of _semantics, reported as the ModelConfig fields that set them.
_SOURCES = {
    "kv_heads": ("n_kv_heads",),
    "dim_per_head": ("head_dim",),
    "layer_windows": ("sliding_window", "window_pattern"),
    "attention_scale": ("query_pre_attn_scalar",),
}


def _describe(config: ModelConfig, key: str) -> str:
    return ", ".join(f"{f}={getattr(config, f)!r}" for f in _SOURCES.get(key, (key,)))


def to_hf_config(config: ModelConfig) -> dict[str, Any]:
    """The Hugging Face ``config.json`` content for ``config``.

    Raises ``ValueError`` naming the fields the family's Hugging Face config cannot express.
    """
    hf: dict[str, Any] = {
        "model_type": config.family,
        "architectures": [_ARCHITECTURES[config.family]],
        **_WRITERS[config.family](config),
        "tie_word_embeddings": config.tie_embeddings,
        "bos_token_id": config.bos_token_id,
        "eos_token_id": config.eos_token_id,
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
