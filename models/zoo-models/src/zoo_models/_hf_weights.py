"""Tensor names and layouts: Hugging Face checkpoints ↔ :class:`Transformer` leaves, per family.

A :class:`Rule` ties one or more Hugging Face tensors to one or more model leaves, with the
transform each way (identity for ``nn.Linear``, a transpose for GPT-2's ``Conv1D``, a split /
concat for GPT-2's fused ``c_attn``). Model leaves are named by their attribute path, e.g.
``embed.weight`` or, for layer rules, the path inside one block, e.g. ``attn.q_proj.weight``.
Transforms use ``jax.numpy`` so expected shapes come from ``jax.eval_shape`` without allocating.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array

from ._config import ModelConfig

__all__ = ["GEMMA3_PREFIXES", "Rule", "ignorable", "layer_rules", "same", "top_rules", "transpose"]

Transform = Callable[[Sequence[Array]], list[Array]]


def same(xs: Sequence[Array]) -> list[Array]:
    """The identity transform: the tensor is the leaf."""
    return list(xs)


def transpose(xs: Sequence[Array]) -> list[Array]:
    """The transpose (GPT-2's ``Conv1D`` stores ``[in, out]``): its own inverse."""
    return [x.T for x in xs]


@dataclasses.dataclass(frozen=True)
class Rule:
    """Hugging Face tensors ``hf`` ↔ model leaves ``ours``.

    Attributes:
        hf: tensor names; in layer rules ``{i}`` stands for the layer index.
        ours: leaf paths (block-relative in layer rules).
        to_ours: Hugging Face arrays (in ``hf`` order) → model arrays (in ``ours`` order).
        to_hf: the inverse.
    """

    hf: tuple[str, ...]
    ours: tuple[str, ...]
    to_ours: Transform = same
    to_hf: Transform = same

    def names(self, layer: int | None = None) -> tuple[str, ...]:
        """The Hugging Face names, for layer ``layer`` in a layer rule."""
        return tuple(n.format(i=layer) for n in self.hf)


def _one(hf: str, ours: str, transform: Transform = same) -> Rule:
    # Both transforms in this module are their own inverses (identity, transpose).
    return Rule((hf,), (ours,), transform, transform)


def _xp(xs: Sequence[Array]) -> Any:
    # numpy for host arrays (checkpoints are assembled on the host, then placed once), jax.numpy
    # for device arrays and tracers.
    return jnp if any(isinstance(x, jax.Array) for x in xs) else np


def _fused_qkv_in(xs: Sequence[Array]) -> list[Array]:
    # GPT-2's c_attn is Conv1D [D, 3D] ([in, out]); columns are q | k | v.
    (w,) = xs
    return [part.T for part in _xp(xs).split(w, 3, axis=-1)]


def _fused_qkv_out(xs: Sequence[Array]) -> list[Array]:
    return [_xp(xs).concatenate([x.T for x in xs], axis=-1)]


def _fused_bias_in(xs: Sequence[Array]) -> list[Array]:
    return list(_xp(xs).split(xs[0], 3, axis=-1))


def _fused_bias_out(xs: Sequence[Array]) -> list[Array]:
    return [_xp(xs).concatenate(list(xs), axis=-1)]


def _gpt2(config: ModelConfig) -> tuple[list[Rule], list[Rule]]:
    p = "transformer."
    top = [
        _one(p + "wte.weight", "embed.weight"),
        _one(p + "wpe.weight", "pos_embed.weight"),
        _one(p + "ln_f.weight", "final_norm.weight"),
        _one(p + "ln_f.bias", "final_norm.bias"),
    ]
    if not config.tie_embeddings:
        top.append(_one("lm_head.weight", "lm_head.weight"))
    h = p + "h.{i}."
    qkv = ("attn.q_proj", "attn.k_proj", "attn.v_proj")
    layer = [
        _one(h + "ln_1.weight", "attn_norm.weight"),
        _one(h + "ln_1.bias", "attn_norm.bias"),
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
        _one(h + "attn.c_proj.weight", "attn.o_proj.weight", transpose),
        _one(h + "attn.c_proj.bias", "attn.o_proj.bias"),
        _one(h + "ln_2.weight", "mlp_norm.weight"),
        _one(h + "ln_2.bias", "mlp_norm.bias"),
        _one(h + "mlp.c_fc.weight", "mlp.up.weight", transpose),
        _one(h + "mlp.c_fc.bias", "mlp.up.bias"),
        _one(h + "mlp.c_proj.weight", "mlp.down.weight", transpose),
        _one(h + "mlp.c_proj.bias", "mlp.down.bias"),
    ]
    return top, layer


def _llama_like(config: ModelConfig) -> tuple[list[Rule], list[Rule]]:
    top = [
        _one("model.embed_tokens.weight", "embed.weight"),
        _one("model.norm.weight", "final_norm.weight"),
    ]
    if not config.tie_embeddings:
        top.append(_one("lm_head.weight", "lm_head.weight"))
    a = "model.layers.{i}.self_attn."
    m = "model.layers.{i}.mlp."
    n = "model.layers.{i}."
    layer = [_one(f"{a}{x}_proj.weight", f"attn.{x}_proj.weight") for x in "qkvo"]
    if config.qkv_bias:
        layer += [_one(f"{a}{x}_proj.bias", f"attn.{x}_proj.bias") for x in "qkv"]
    if config.out_bias:
        layer.append(_one(f"{a}o_proj.bias", "attn.o_proj.bias"))
    if config.qk_norm:
        layer += [_one(f"{a}{x}_norm.weight", f"attn.{x}_norm.weight") for x in "qk"]
    for hf, ours in (("gate_proj", "gate"), ("up_proj", "up"), ("down_proj", "down")):
        layer.append(_one(f"{m}{hf}.weight", f"mlp.{ours}.weight"))
        if config.mlp_bias:
            layer.append(_one(f"{m}{hf}.bias", f"mlp.{ours}.bias"))
    if config.pre_norms:
        layer.append(_one(n + "input_layernorm.weight", "attn_norm.weight"))
    if config.post_norms:
        # Gemma 2 and 3, OLMo 2: post_attention_layernorm normalises the attention output,
        # post_feedforward_layernorm the MLP's; with pre-norms the MLP's is
        # pre_feedforward_layernorm.
        layer += [
            _one(n + "post_attention_layernorm.weight", "post_attn_norm.weight"),
            _one(n + "post_feedforward_layernorm.weight", "post_mlp_norm.weight"),
        ]
        if config.pre_norms:
            layer.append(_one(n + "pre_feedforward_layernorm.weight", "mlp_norm.weight"))
    else:
        layer.append(_one(n + "post_attention_layernorm.weight", "mlp_norm.weight"))
    return top, layer


def _stack_transposed(xs: Sequence[Array]) -> list[Array]:
    # Per-expert nn.Linear weights [out, in] -> one [E, in, out] leaf.
    return [_xp(xs).stack([x.T for x in xs])]


def _split_transposed(xs: Sequence[Array]) -> list[Array]:
    (w,) = xs
    if not isinstance(w, jax.core.Tracer):
        w = np.asarray(w)  # one transfer, then host slices (not one device op per expert)
    return [w[e].T for e in range(w.shape[0])]


# Hugging Face names of a mixture-of-experts MLP: the module, its router, and each expert's
# gate / up / down projections.
_EXPERT_NAMES = {
    "mixtral": ("block_sparse_moe", "gate", ("w1", "w3", "w2")),
    "qwen3_moe": ("mlp", "gate", ("gate_proj", "up_proj", "down_proj")),
}


def _moe_rules(config: ModelConfig) -> list[Rule]:
    module, router, projections = _EXPERT_NAMES[config.family]
    p = f"model.layers.{{i}}.{module}."
    out = [_one(f"{p}{router}.weight", "mlp.router.weight")]
    for hf, ours in zip(projections, ("gate_proj", "up_proj", "down_proj"), strict=True):
        names = tuple(f"{p}experts.{e}.{hf}.weight" for e in range(config.n_experts))
        out.append(Rule(names, (f"mlp.{ours}",), _stack_transposed, _split_transposed))
    return out


def top_rules(config: ModelConfig) -> list[Rule]:
    """The rules of the tensors outside the layers."""
    return _gpt2(config)[0] if config.family == "gpt2" else _llama_like(config)[0]


def layer_rules(config: ModelConfig, layer: int) -> list[Rule]:
    """The rules of layer ``layer``'s tensors (``{i}`` in their names stands for it)."""
    if config.family == "gpt2":
        return _gpt2(config)[1]
    rules = _llama_like(config)[1]
    if not config.layer_moe(layer):
        return rules
    return [r for r in rules if not r.ours[0].startswith("mlp.")] + _moe_rules(config)


# Tensors some checkpoints carry that hold no parameters: GPT-2's causal-mask buffers, old
# Llama rotary tables, and a tied head stored next to the embedding.
_IGNORABLE = (
    r"(transformer\.)?h\.\d+\.attn\.(masked_)?bias",
    r"model\.layers\.\d+\.self_attn\.rotary_emb\.inv_freq",
)
# An image-and-text Gemma 3 checkpoint: its vision tower and projector are not loaded.
_GEMMA3_VISION = r"(model\.)?(vision_tower|multi_modal_projector)\..*"

#: Where an image-and-text Gemma 3 checkpoint keeps the language model's ``model.*`` tensors:
#: transformers 5 writes ``model.language_model.*``, the published checkpoints
#: ``language_model.model.*`` (their tied head, if stored, ``language_model.lm_head.weight``).
GEMMA3_PREFIXES = ("model.language_model.", "language_model.model.")


def ignorable(name: str, config: ModelConfig) -> bool:
    """Whether tensor ``name`` may be present in a checkpoint without a model leaf."""
    if config.tie_embeddings and name in ("lm_head.weight", "language_model.lm_head.weight"):
        return True
    if config.family == "gemma3_text" and re.fullmatch(_GEMMA3_VISION, name):
        return True
    return any(re.fullmatch(p, name) for p in _IGNORABLE)
