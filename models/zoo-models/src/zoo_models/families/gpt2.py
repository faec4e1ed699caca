"""GPT-2: learned positions, LayerNorm, a plain GELU MLP, and ``Conv1D`` weights with q, k and
v fused in one ``c_attn``."""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any

from jaxtyping import Array

from .._config import ModelConfig
from .._hf_fields import activation, as_float, require, special_ids
from .._hf_weights import Rule, array_module, one, transpose
from ._registry import Family, register
from ._tiny import TINY

__all__ = ["FAMILY"]

KEYS = {
    "d_model": "n_embd",
    "n_layers": "n_layer",
    "n_heads": "n_head",
    "mlp_hidden": "n_inner",
    "max_position": "n_positions",
    "norm_eps": "layer_norm_epsilon",
    "activation": "activation_function",
}
_ACT_OUT = {"gelu": "gelu", "gelu_tanh": "gelu_new", "silu": "silu", "relu": "relu"}


def read(hf: Mapping[str, Any]) -> dict[str, Any]:
    """ModelConfig fields of a GPT-2 config.json."""
    require(hf, "gpt2", "vocab_size", "n_embd", "n_layer", "n_head", "n_positions")
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
        "activation": activation(hf.get("activation_function", "gelu_new"), "gpt2"),
        "mlp_gated": False,
        "norm": "layernorm",
        "norm_eps": as_float(hf, "layer_norm_epsilon", 1e-5),
        "positional": "learned",
        "max_position": hf["n_positions"],
        "tie_embeddings": bool(hf.get("tie_word_embeddings", True)),
        "qkv_bias": True,
        "out_bias": True,
        "mlp_bias": True,
        **special_ids(hf),
    }


def write(c: ModelConfig) -> dict[str, Any]:
    """GPT-2's config.json keys for ``c``."""
    return {
        "vocab_size": c.vocab_size,
        "n_embd": c.d_model,
        "n_layer": c.n_layers,
        "n_head": c.n_heads,
        "n_inner": c.mlp_hidden,
        "n_positions": c.max_position,
        "activation_function": _ACT_OUT[c.activation],
        "layer_norm_epsilon": c.norm_eps,
        "scale_attn_weights": True,
        "scale_attn_by_inverse_layer_idx": False,
        "reorder_and_upcast_attn": False,
        # Inference checkpoints: dropout off unless the config says otherwise.
        "attn_pdrop": c.dropout,
        "embd_pdrop": c.dropout,
        "resid_pdrop": c.dropout,
    }


def _fused_qkv_in(xs: Sequence[Array]) -> list[Array]:
    # GPT-2's c_attn is Conv1D [D, 3D] ([in, out]); columns are q | k | v.
    (w,) = xs
    return [part.T for part in array_module(xs).split(w, 3, axis=-1)]


def _fused_qkv_out(xs: Sequence[Array]) -> list[Array]:
    return [array_module(xs).concatenate([x.T for x in xs], axis=-1)]


def _fused_bias_in(xs: Sequence[Array]) -> list[Array]:
    return list(array_module(xs).split(xs[0], 3, axis=-1))


def _fused_bias_out(xs: Sequence[Array]) -> list[Array]:
    return [array_module(xs).concatenate(list(xs), axis=-1)]


def top_rules(config: ModelConfig) -> list[Rule]:
    """Token and position tables, the final norm and (untied) the output head."""
    p = "transformer."
    top = [
        one(p + "wte.weight", "embed.weight"),
        one(p + "wpe.weight", "pos_embed.weight"),
        one(p + "ln_f.weight", "final_norm.weight"),
        one(p + "ln_f.bias", "final_norm.bias"),
    ]
    if not config.tie_embeddings:
        top.append(one("lm_head.weight", "lm_head.weight"))
    return top


def layer_rules(config: ModelConfig, layer: int) -> list[Rule]:
    """A block's tensors: ``c_attn`` split into q, k and v, ``Conv1D`` weights transposed."""
    h = "transformer.h.{i}."
    qkv = ("attn.q_proj", "attn.k_proj", "attn.v_proj")
    return [
        one(h + "ln_1.weight", "attn_norm.weight"),
        one(h + "ln_1.bias", "attn_norm.bias"),
        Rule(
            (h + "attn.c_attn.weight",),
            tuple(f"{q}.weight" for q in qkv),
            _fused_qkv_in,
            _fused_qkv_out,
        ),
        Rule(
            (h + "attn.c_attn.bias",),
            tuple(f"{q}.bias" for q in qkv),
            _fused_bias_in,
            _fused_bias_out,
        ),
        one(h + "attn.c_proj.weight", "attn.o_proj.weight", transpose),
        one(h + "attn.c_proj.bias", "attn.o_proj.bias"),
        one(h + "ln_2.weight", "mlp_norm.weight"),
        one(h + "ln_2.bias", "mlp_norm.bias"),
        one(h + "mlp.c_fc.weight", "mlp.up.weight", transpose),
        one(h + "mlp.c_fc.bias", "mlp.up.bias"),
        one(h + "mlp.c_proj.weight", "mlp.down.weight", transpose),
        one(h + "mlp.c_proj.bias", "mlp.down.bias"),
    ]


def aliases(names: set[str]) -> dict[str, str]:
    """The original GPT-2 checkpoints store ``wte.weight``, not ``transformer.wte.weight``."""
    if "transformer.wte.weight" not in names and "wte.weight" in names:
        return {f"transformer.{n}": n for n in names if not n.startswith("lm_head.")}
    return {}


def _gpt2(**kw: Any) -> ModelConfig:
    base = dict(
        family="gpt2",
        vocab_size=50257,
        activation="gelu_tanh",
        mlp_gated=False,
        norm="layernorm",
        norm_eps=1e-5,
        positional="learned",
        max_position=1024,
        tie_embeddings=True,
        qkv_bias=True,
        out_bias=True,
        mlp_bias=True,
        bos_token_id=50256,
        eos_token_id=50256,
    )
    return ModelConfig(**{**base, **kw})


@functools.cache
def presets() -> dict[str, ModelConfig]:
    """GPT-2 (124M), GPT-2 medium and ``gpt2-tiny``."""
    return {
        "gpt2": _gpt2(d_model=768, n_layers=12, n_heads=12, mlp_hidden=3072),
        "gpt2-medium": _gpt2(d_model=1024, n_layers=24, n_heads=16, mlp_hidden=4096),
        "gpt2-tiny": _gpt2(**{**TINY, "mlp_hidden": 256}, bos_token_id=255, eos_token_id=255),
    }


FAMILY = register(
    Family(
        name="gpt2",
        architecture="GPT2LMHeadModel",
        read=read,
        write=write,
        hf_keys=KEYS,
        top_rules=top_rules,
        layer_rules=layer_rules,
        presets=presets,
        aliases=aliases,
        # c_attn fuses q, k and v in one module, which a PEFT adapter cannot split: LoRA adapts
        # the attention output and the MLP instead.
        lora_targets=("o", "up", "down"),
    )
)
