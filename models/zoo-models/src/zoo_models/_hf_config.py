"""Hugging Face ``config.json`` ↔ :class:`ModelConfig`, through each family's reader and writer
(:mod:`zoo_models.families`).

A ModelConfig that a family's Hugging Face config cannot express (say a Llama with a sliding
window) is refused on writing, naming the fields, rather than silently changed.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Any

from ._config import ModelConfig
from .families import SUPPORTED_MODEL_TYPES, lookup, model_types, reader

__all__ = ["SUPPORTED_MODEL_TYPES", "from_hf_config", "to_hf_config"]

# Fields that describe how a model runs here, not what it computes; a load may set them.
RUNTIME_FIELDS = (
    "dropout",
    "init_std",
    "param_dtype",
    "compute_dtype",
    "remat",
    "mlp_chunk",
    "scan_layers",
    "attention_implementation",
    "linear_attention_implementation",
    "router_aux_loss_coef",
    "output_router_logits",
    "router_bias_update_speed",
)


def _hf_names(message: str, keys: Mapping[str, str]) -> str:
    """``message`` with each `ModelConfig field` in backticks renamed to its config.json key."""
    return re.sub(r"`(\w+)`", lambda m: f"`{keys.get(m.group(1), m.group(1))}`", message)


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
    found = reader(model_type)
    if found is None:
        raise ValueError(
            f"{source} has model_type {model_type!r}; supported model types: "
            f"{', '.join(model_types())}."
        )
    family, read = found
    bad = sorted(set(changes) - set(RUNTIME_FIELDS))
    if bad:
        raise ValueError(
            f"cannot override {', '.join(bad)} when loading; only {', '.join(RUNTIME_FIELDS)}."
        )
    try:
        fields = read(hf)
        dtype = checkpoint_dtype(hf)
        if dtype is not None:
            fields["param_dtype"] = dtype
        config = ModelConfig(**fields)
    except (ValueError, TypeError) as e:
        # Reported under config.json's names (hidden_size), not the ModelConfig's (d_model).
        raise ValueError(f"{source}: {_hf_names(str(e), family.hf_keys)}") from None
    return config.replace(**changes) if changes else config


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
    # Which layers are gated DeltaNets, however the pattern is spelled.
    out["linear_pattern"] = [config.layer_linear(i) for i in range(config.n_layers)]
    out["dim_per_head"] = config.dim_per_head
    out["layer_windows"] = [config.layer_window(i) for i in range(config.n_layers)]
    out["attention_scale"] = config.attention_scale
    rope: tuple[str, ...] = ("rope_theta", "rope_factor", "rope_low_freq_factor")
    rope += ("rope_high_freq_factor", "rope_original_max_position", "rope_scaling")
    yarn: tuple[str, ...] = ("rope_beta_fast", "rope_beta_slow", "rope_mscale")
    yarn += ("rope_mscale_all_dim",)
    yarn += ("rope_truncate", "rope_attention_factor")
    unused: tuple[str, ...] = () if config.rope_scaling == "yarn" else yarn
    if config.positional == "learned":
        unused += (*rope, "rope_interleave")
    elif config.rope_scaling == "none":
        unused += rope[1:5]
    elif config.rope_scaling == "linear":
        unused += rope[2:5]
    elif config.rope_scaling == "yarn":
        unused += rope[2:4]
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
    family = lookup(config.family)
    eos = list(config.eos_token_ids)
    hf: dict[str, Any] = {
        "model_type": family.name,
        "architectures": [family.architecture],
        **family.write(config),
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
