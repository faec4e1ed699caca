"""DeepSeek-V3 (and the models built like it: Moonlight, Kimi-K2): multi-head latent attention,
then a mixture of experts with shared experts, sigmoid scores whose selection adds a
correction bias, group-limited top-k and a routed scaling factor; the first
``first_k_dense_replace`` layers are dense.

Multi-token-prediction layers (``model.layers.{num_hidden_layers + j}``, DeepSeek-V3's
``num_nextn_predict_layers``) are not part of the model ``transformers`` runs: they are left
out on load, with one line saying how many tensors, and an export has none (its config.json
says ``num_nextn_predict_layers: 0``).
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Mapping
from typing import Any

from .._config import ModelConfig
from .._hf_fields import rope_in, rope_out
from .._hf_weights import Rule, one
from . import _decoder, _experts
from ._registry import register
from ._tiny import TINY, TINY_IDS

__all__ = ["FAMILY"]

logger = logging.getLogger("zoo_models")

KEYS = {
    **_decoder.KEYS,
    "n_experts": "n_routed_experts",
    "experts_per_token": "num_experts_per_tok",
    "expert_hidden": "moe_intermediate_size",
    "dense_layers": "first_k_dense_replace",
    "shared_experts": "n_shared_experts",
    "expert_groups": "n_group",
    "expert_group_top_k": "topk_group",
    "routed_scaling_factor": "routed_scaling_factor",
    "normalize_expert_weights": "norm_topk_prob",
    "kv_lora_rank": "kv_lora_rank",
    "q_lora_rank": "q_lora_rank",
    "rope_head_dim": "qk_rope_head_dim",
    "v_head_dim": "v_head_dim",
}

# DeepseekV3Config's defaults (the published config.json files name most of them).
_DEFAULTS: dict[str, Any] = {
    "vocab_size": 129280,
    "hidden_size": 7168,
    "intermediate_size": 18432,
    "moe_intermediate_size": 2048,
    "num_hidden_layers": 61,
    "num_attention_heads": 128,
    "n_shared_experts": 1,
    "n_routed_experts": 256,
    "routed_scaling_factor": 2.5,
    "kv_lora_rank": 512,
    "q_lora_rank": 1536,
    "qk_rope_head_dim": 64,
    "v_head_dim": 128,
    "qk_nope_head_dim": 128,
    "n_group": 8,
    "topk_group": 4,
    "num_experts_per_tok": 8,
    "first_k_dense_replace": 3,
    "norm_topk_prob": True,
    "max_position_embeddings": 4096,
    "rms_norm_eps": 1e-6,
    "rope_interleave": True,
    "attention_bias": False,
    "bos_token_id": 0,
    "eos_token_id": 1,
}

#: The aux-loss-free balancing speed DeepSeek-V3 trained with (its ``gamma``): training moves
#: each router's correction bias this far per step towards an even load.
BIAS_UPDATE_SPEED = 0.001


def read(hf: Mapping[str, Any]) -> dict[str, Any]:
    """ModelConfig fields of a DeepSeek-V3 config.json."""
    hf = {**_DEFAULTS, **hf}
    # DeepSeek's own config.json names its routing; transformers implements this one only.
    for key, want in (("scoring_func", "sigmoid"), ("topk_method", "noaux_tc")):
        if hf.get(key) not in (None, want):
            raise ValueError(
                f"deepseek_v3 config.json has {key} {hf[key]!r}; only {want!r} routing is "
                "supported (as transformers runs the family)."
            )
    n_heads = hf["num_attention_heads"]
    kv = hf.get("num_key_value_heads") or n_heads
    if kv != n_heads:
        raise ValueError(
            f"deepseek_v3 config.json has num_key_value_heads {kv} for {n_heads} heads; latent "
            "attention expands one key/value head per query head."
        )
    first_dense = hf["first_k_dense_replace"] or 0
    if not isinstance(first_dense, int) or first_dense < 0:
        raise ValueError(
            f"deepseek_v3 config.json has first_k_dense_replace {first_dense!r}; it must be >= 0."
        )
    out = _decoder.read(hf, "deepseek_v3")
    nope, rope = hf["qk_nope_head_dim"], hf["qk_rope_head_dim"]
    bias = bool(hf.get("attention_bias", False))
    return {
        **out,
        **rope_in(hf, "deepseek_v3"),
        "n_kv_heads": n_heads,
        "head_dim": nope + rope,
        "rope_head_dim": rope,
        "v_head_dim": hf["v_head_dim"],
        "kv_lora_rank": hf["kv_lora_rank"],
        "q_lora_rank": hf.get("q_lora_rank"),
        "rope_interleave": bool(hf.get("rope_interleave", True)),
        "qkv_bias": bias,
        "out_bias": bias,
        **_experts.read(
            {**hf, "num_experts": hf["n_routed_experts"]}, "deepseek_v3", required=True
        ),
        "expert_hidden": hf["moe_intermediate_size"],
        "dense_layers": tuple(range(min(first_dense, out["n_layers"]))),
        "shared_experts": int(hf.get("n_shared_experts") or 0),
        "router_scoring": "sigmoid",
        "expert_groups": int(hf.get("n_group") or 1),
        "expert_group_top_k": int(hf.get("topk_group") or 1),
        "routed_scaling_factor": float(hf["routed_scaling_factor"]),
        "normalize_expert_weights": bool(hf.get("norm_topk_prob", True)),
        "router_bias_update_speed": BIAS_UPDATE_SPEED,
    }


def write(c: ModelConfig) -> dict[str, Any]:
    """DeepSeek-V3's config.json keys for ``c``."""
    dense = len(c.dense_layers)
    if c.dense_layers != tuple(range(dense)):
        raise ValueError(
            f"a Hugging Face deepseek_v3 config has dense layers first only, not "
            f"dense_layers={c.dense_layers!r}."
        )
    assert c.rope_head_dim is not None
    out = {
        **_decoder.write(c),
        **rope_out(c),
        "num_key_value_heads": c.n_heads,
        "qk_nope_head_dim": c.dim_per_head - c.rope_head_dim,
        "qk_rope_head_dim": c.rope_head_dim,
        "v_head_dim": c.v_head_dim,
        "kv_lora_rank": c.kv_lora_rank,
        "q_lora_rank": c.q_lora_rank,
        "rope_interleave": c.rope_interleave,
        "attention_bias": c.qkv_bias,
        "n_routed_experts": c.n_experts,
        "moe_intermediate_size": c.expert_width,
        "first_k_dense_replace": dense,
        "n_shared_experts": c.shared_experts,
        "n_group": c.expert_groups,
        "topk_group": c.expert_group_top_k,
        "routed_scaling_factor": c.routed_scaling_factor,
        "norm_topk_prob": c.normalize_expert_weights,
        "scoring_func": "sigmoid",
        "topk_method": "noaux_tc",
        "num_nextn_predict_layers": 0,  # an export carries no multi-token-prediction layers
        **_experts.write(c),
    }
    out.pop("head_dim", None)  # transformers derives it (the rotary part)
    return out


def layer_rules(config: ModelConfig, layer: int) -> list[Rule]:
    """A layer's tensors: latent attention, the norms, and a dense MLP (the first layers) or
    the router, its correction bias, the routed experts and the shared ones."""
    a = "model.layers.{i}.self_attn."
    n = "model.layers.{i}."
    rules = [
        one(n + "input_layernorm.weight", "attn_norm.weight"),
        one(n + "post_attention_layernorm.weight", "mlp_norm.weight"),
        one(f"{a}kv_a_proj_with_mqa.weight", "attn.kv_a_proj.weight"),
        one(f"{a}kv_a_layernorm.weight", "attn.kv_a_norm.weight"),
        one(f"{a}kv_b_proj.weight", "attn.kv_b_proj.weight"),
        one(f"{a}o_proj.weight", "attn.o_proj.weight"),
    ]
    if config.q_lora_rank is None:
        rules.append(one(f"{a}q_proj.weight", "attn.q_proj.weight"))
    else:
        rules += [
            one(f"{a}q_a_proj.weight", "attn.q_a_proj.weight"),
            one(f"{a}q_a_layernorm.weight", "attn.q_a_norm.weight"),
            one(f"{a}q_b_proj.weight", "attn.q_b_proj.weight"),
        ]
    if config.qkv_bias:
        rules += [one(f"{a}kv_a_proj_with_mqa.bias", "attn.kv_a_proj.bias")]
        if config.q_lora_rank is not None:
            rules.append(one(f"{a}q_a_proj.bias", "attn.q_a_proj.bias"))
    if config.out_bias:
        rules.append(one(f"{a}o_proj.bias", "attn.o_proj.bias"))
    m = "model.layers.{i}.mlp."
    if not config.layer_moe(layer):
        return rules + [
            one(f"{m}{hf}.weight", f"mlp.{ours}.weight")
            for hf, ours in (("gate_proj", "gate"), ("up_proj", "up"), ("down_proj", "down"))
        ]
    experts = _experts.layer_rules(
        config,
        layer,
        module="mlp",
        router="gate",
        projections=("gate_proj", "up_proj", "down_proj"),
    )
    rules += [r for r in experts if r.ours[0].startswith("mlp.")]
    rules.append(one(f"{m}gate.e_score_correction_bias", "mlp.correction_bias"))
    if config.shared_experts:
        rules += [
            one(f"{m}shared_experts.{hf}.weight", f"mlp.shared.{ours}.weight")
            for hf, ours in (("gate_proj", "gate"), ("up_proj", "up"), ("down_proj", "down"))
        ]
    return rules


_LAYER = re.compile(r"model\.layers\.(\d+)\.")


def view(tensors: Mapping[str, Any], config: ModelConfig, source: str) -> Mapping[str, Any]:
    """The checkpoint without its multi-token-prediction layers (layers past the model's)."""
    extra = [
        name
        for name in tensors
        if (m := _LAYER.match(name)) is not None and int(m.group(1)) >= config.n_layers
    ]
    if not extra:
        return tensors
    layers = sorted({int(_LAYER.match(name).group(1)) for name in extra})  # type: ignore[union-attr]
    logger.warning(
        "note: %s: %d multi-token-prediction tensor(s) of layer(s) %s are not loaded; "
        "training and exports leave them out",
        source,
        len(extra),
        ", ".join(map(str, layers)),
    )
    return _Without(tensors, set(extra))


class _Without(Mapping[str, Any]):
    """``tensors`` less ``hidden`` (shapes and dtypes still read from the headers)."""

    def __init__(self, tensors: Mapping[str, Any], hidden: set[str]) -> None:
        self._base, self._hidden = tensors, hidden
        self._names = [n for n in tensors if n not in hidden]
        for method in ("shape", "dtype"):
            found = getattr(tensors, method, None)
            if callable(found):
                setattr(self, method, found)

    def __getitem__(self, name: str) -> Any:
        if name in self._hidden:
            raise KeyError(name)
        return self._base[name]

    def __iter__(self) -> Any:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)


def _deepseek(**kw: Any) -> ModelConfig:
    base: dict[str, Any] = dict(
        family="deepseek_v3",
        activation="silu",
        norm_eps=1e-6,
        rope_interleave=True,
        router_scoring="sigmoid",
        normalize_expert_weights=True,
        router_bias_update_speed=BIAS_UPDATE_SPEED,
    )
    config = {**base, **kw}
    config["n_kv_heads"] = config["n_heads"]
    return ModelConfig(**config)


@functools.cache
def presets() -> dict[str, ModelConfig]:
    """DeepSeek-V3 (671B), Moonlight-16B-A3B (the same architecture, 16B) and
    ``deepseek-v3-tiny``."""
    return {
        "deepseek-v3": _deepseek(
            vocab_size=129280,
            d_model=7168,
            n_layers=61,
            n_heads=128,
            head_dim=192,
            rope_head_dim=64,
            v_head_dim=128,
            q_lora_rank=1536,
            kv_lora_rank=512,
            mlp_hidden=18432,
            expert_hidden=2048,
            n_experts=256,
            experts_per_token=8,
            shared_experts=1,
            expert_groups=8,
            expert_group_top_k=4,
            routed_scaling_factor=2.5,
            dense_layers=(0, 1, 2),
            max_position=163840,
            rope_theta=10000.0,
            rope_scaling="yarn",
            rope_factor=40.0,
            rope_original_max_position=4096,
            rope_mscale=1.0,
            rope_mscale_all_dim=1.0,
            bos_token_id=0,
            eos_token_id=1,
        ),
        "moonlight-16b-a3b": _deepseek(
            vocab_size=163840,
            d_model=2048,
            n_layers=27,
            n_heads=16,
            head_dim=192,
            rope_head_dim=64,
            v_head_dim=128,
            kv_lora_rank=512,
            mlp_hidden=11264,
            expert_hidden=1408,
            n_experts=64,
            experts_per_token=6,
            shared_experts=2,
            routed_scaling_factor=2.446,
            dense_layers=(0,),
            max_position=8192,
            rope_theta=50000.0,
            norm_eps=1e-5,
            bos_token_id=163584,
            eos_token_id=163585,
        ),
        # Latent attention with a query bottleneck, one dense layer then experts with a shared
        # one, 8 routed experts in 2 groups (top 1 group, top 2 experts).
        "deepseek-v3-tiny": _deepseek(
            **{**TINY, **TINY_IDS, "n_layers": 2},
            head_dim=24,
            rope_head_dim=8,
            v_head_dim=12,
            q_lora_rank=24,
            kv_lora_rank=16,
            mlp_hidden=128,
            expert_hidden=32,
            n_experts=8,
            experts_per_token=2,
            shared_experts=1,
            expert_groups=2,
            expert_group_top_k=1,
            routed_scaling_factor=2.5,
            dense_layers=(0,),
        ),
    }


FAMILY = register(
    _decoder.family(
        "deepseek_v3",
        "DeepseekV3ForCausalLM",
        read,
        write,
        presets,
        hf_keys=KEYS,
        layer_rules=layer_rules,
        view=view,
        # The latent projections are modules of their own in the Hugging Face layout (a
        # checkpoint without a query bottleneck, Moonlight's, adds `q` by --lora-targets).
        lora_targets=("q_a", "q_b", "kv_a", "kv_b", "o"),
    )
)
