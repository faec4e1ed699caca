"""Gemma 3 (``gemma3_text``): Gemma 2 with per-head qk-norm, five sliding-window layers to each
global one, and a rotary base of their own for the sliding-window layers. An image-and-text
Gemma 3 checkpoint (``gemma3``) is read for its language model."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from .._config import ModelConfig
from .._hf_fields import rope_in, window_pattern
from . import _decoder, gemma2
from ._registry import register
from ._tiny import TINY, TINY_IDS

__all__ = ["FAMILY", "PREFIXES"]

#: Where an image-and-text Gemma 3 checkpoint keeps the language model's ``model.*`` tensors:
#: transformers 5 writes ``model.language_model.*``, the published checkpoints
#: ``language_model.model.*`` (their tied head, if stored, ``language_model.lm_head.weight``).
PREFIXES = ("model.language_model.", "language_model.model.")

# Gemma3TextConfig's defaults: the published multimodal checkpoints write only what differs.
_DEFAULTS: dict[str, Any] = {
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


def _rope(hf: Mapping[str, Any]) -> dict[str, Any]:
    """Global layers' rotary base and scaling, and the local layers' base."""
    params = hf.get("rope_parameters")
    if isinstance(params, Mapping) and (
        "full_attention" in params or "sliding_attention" in params
    ):
        # transformers 5: one set of parameters per layer type.
        full = params.get("full_attention") or {}
        local = params.get("sliding_attention") or {}
        out = rope_in({"rope_parameters": {"rope_theta": 1e6, **full}}, "gemma3_text")
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
        **rope_in(older, "gemma3_text"),
        "rope_local_theta": float(hf.get("rope_local_base_freq", 10000.0)),
    }


def read(hf: Mapping[str, Any]) -> dict[str, Any]:
    """ModelConfig fields of a Gemma 3 text config.json."""
    hf = {**_DEFAULTS, **hf}
    if hf.get("use_bidirectional_attention"):
        raise ValueError(
            "gemma3_text config.json sets use_bidirectional_attention, which is not supported."
        )
    out = _decoder.read({**hf, "hidden_act": hf["hidden_activation"]}, "gemma3_text")
    n_layers = out["n_layers"]
    kinds = hf.get("layer_types")
    if kinds is None:
        every = hf.get("sliding_window_pattern", hf.get("_sliding_window_pattern", 6))
        kinds = [
            "sliding_attention" if (i + 1) % every else "full_attention" for i in range(n_layers)
        ]
    pattern = window_pattern({"layer_types": kinds}, n_layers, "gemma3_text")
    window = hf.get("sliding_window")
    local = window is not None and any(pattern)
    return {
        **out,
        **_rope(hf),
        "tie_embeddings": bool(hf["tie_word_embeddings"]),
        "norm_unit_offset": True,
        **_decoder.attention_bias(hf),
        "qk_norm": True,
        "sliding_window": window if local else None,
        "window_pattern": pattern if local else (True,),
        "attn_logit_soft_cap": hf.get("attn_logit_softcapping"),
        "final_logit_soft_cap": hf.get("final_logit_softcapping"),
        "query_pre_attn_scalar": float(hf["query_pre_attn_scalar"]),
        "embedding_scale": True,
        "post_norms": True,
    }


def read_image_text(hf: Mapping[str, Any]) -> dict[str, Any]:
    """The language model of an image-and-text Gemma 3 checkpoint (``text_config``)."""
    text = dict(hf.get("text_config") or {})
    # The top level may name the special ids and the tie (it does in the published ones).
    for name in ("bos_token_id", "eos_token_id", "pad_token_id", "tie_word_embeddings"):
        if name in hf:
            text[name] = hf[name]
    return read(text)


def write(c: ModelConfig) -> dict[str, Any]:
    """Gemma 3's text config.json keys for ``c``."""
    out = gemma2.write(c)
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


#: An image-and-text checkpoint's language model tensors, under :data:`PREFIXES`.
aliases = _decoder.language_model_aliases(PREFIXES)


def _gemma3(**kw: Any) -> ModelConfig:
    # Five sliding-window layers, then one global; 26 or 34 layers leave a tail of 2 or 4.
    base = dict(
        family="gemma3_text",
        activation="gelu_tanh",
        norm_eps=1e-6,
        norm_unit_offset=True,
        head_dim=256,
        rope_theta=1000000.0,
        rope_local_theta=10000.0,
        tie_embeddings=True,
        window_pattern=(True,) * 5 + (False,),
        query_pre_attn_scalar=256,
        qk_norm=True,
        embedding_scale=True,
        post_norms=True,
        bos_token_id=2,
        eos_token_id=1,
        extra_eos_token_ids=(106,),  # <end_of_turn> of the instruction-tuned checkpoints
        pad_token_id=0,
    )
    return ModelConfig(**{**base, **kw})


@functools.cache
def presets() -> dict[str, ModelConfig]:
    """Gemma 3 1B, 4B (its language model) and ``gemma3-tiny``."""
    return {
        "gemma-3-1b": _gemma3(
            vocab_size=262144,
            d_model=1152,
            n_layers=26,
            n_heads=4,
            n_kv_heads=1,
            mlp_hidden=6912,
            max_position=32768,
            sliding_window=512,
        ),
        "gemma-3-4b": _gemma3(
            vocab_size=262208,
            d_model=2560,
            n_layers=34,
            n_heads=8,
            n_kv_heads=4,
            mlp_hidden=10240,
            max_position=131072,
            sliding_window=1024,
            rope_scaling="linear",
            rope_factor=8.0,
        ),
        # A pattern of 3 over 4 layers (a tail of one), local and global rotary bases, linear
        # scaling on the global layers.
        "gemma3-tiny": _gemma3(
            **{**TINY, **TINY_IDS, "n_layers": 4},
            n_kv_heads=1,
            head_dim=32,
            mlp_hidden=128,
            window_pattern=(True, True, False),
            sliding_window=8,
            rope_scaling="linear",
            rope_factor=4.0,
            query_pre_attn_scalar=32,
            extra_eos_token_ids=(3,),
        ),
    }


FAMILY = register(
    _decoder.family(
        "gemma3_text",
        "Gemma3ForCausalLM",
        read,
        write,
        presets,
        hf_keys=gemma2.KEYS,
        also_reads={"gemma3": read_image_text},
        aliases=aliases,
        # Its vision tower and projector are not loaded.
        ignorable=(r"(model\.)?(vision_tower|multi_modal_projector)\..*",),
    )
)
