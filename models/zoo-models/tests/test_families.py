"""The family registry is the one place a family is declared: every registered family is
complete, and a family registered from here (StarCoder 2, which zoo_models does not ship) is
written, read and loaded by the shared machinery, with transformers' own logits."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator, Mapping
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
import transformers
from _hf_tiny import SEQ, VOCAB, hf_logits

import zoo_models
from zoo_models import families
from zoo_models._hf_fields import (
    ACT_OUT,
    activation,
    as_float,
    require,
    rope_in,
    rope_out,
    special_ids,
)

TOL = 1e-4

# --- StarCoder 2, declared here only -------------------------------------------------------
# LayerNorm with biases, a plain (ungated) MLP named c_fc / c_proj, one use_bias switch for
# every linear layer, norm_epsilon: keys and tensor names no shipped family has.

_KEYS = {"d_model": "hidden_size", "norm_eps": "norm_epsilon", "qkv_bias": "use_bias"}


def _read(hf: Mapping[str, Any]) -> dict[str, Any]:
    require(hf, "starcoder2", "vocab_size", "hidden_size", "num_hidden_layers")
    bias = bool(hf.get("use_bias", True))
    return {
        "family": "starcoder2",
        "vocab_size": hf["vocab_size"],
        "d_model": hf["hidden_size"],
        "n_layers": hf["num_hidden_layers"],
        "n_heads": hf["num_attention_heads"],
        "n_kv_heads": hf["num_key_value_heads"],
        "mlp_hidden": hf["intermediate_size"],
        "activation": activation(hf.get("hidden_act", "gelu_pytorch_tanh"), "starcoder2"),
        "mlp_gated": False,
        "norm": "layernorm",
        "norm_eps": as_float(hf, "norm_epsilon", 1e-5),
        "max_position": hf.get("max_position_embeddings", 4096),
        "tie_embeddings": bool(hf.get("tie_word_embeddings", True)),
        "qkv_bias": bias,
        "out_bias": bias,
        "mlp_bias": bias,
        "sliding_window": hf.get("sliding_window"),
        **rope_in(hf, "starcoder2"),
        **special_ids(hf),
    }


def _write(c: zoo_models.ModelConfig) -> dict[str, Any]:
    return {
        "vocab_size": c.vocab_size,
        "hidden_size": c.d_model,
        "num_hidden_layers": c.n_layers,
        "num_attention_heads": c.n_heads,
        "num_key_value_heads": c.kv_heads,
        "intermediate_size": c.mlp_hidden,
        "hidden_act": ACT_OUT[c.activation],
        "norm_epsilon": c.norm_eps,
        "max_position_embeddings": c.max_position,
        "use_bias": c.qkv_bias,
        "sliding_window": c.sliding_window,
        **rope_out(c),
    }


def _top(c: zoo_models.ModelConfig) -> list[families.Rule]:
    rules = [families.one("model.embed_tokens.weight", "embed.weight")]
    rules += [families.one(f"model.norm.{p}", f"final_norm.{p}") for p in ("weight", "bias")]
    return rules if c.tie_embeddings else [*rules, families.one("lm_head.weight", "lm_head.weight")]


def _layer(c: zoo_models.ModelConfig, layer: int) -> list[families.Rule]:
    n = "model.layers.{i}."
    pairs = [(f"self_attn.{x}_proj", f"attn.{x}_proj") for x in "qkvo"]
    pairs += [("mlp.c_fc", "mlp.up"), ("mlp.c_proj", "mlp.down")]
    rules = [families.one(f"{n}{hf}.weight", f"{ours}.weight") for hf, ours in pairs]
    if c.qkv_bias:
        rules += [families.one(f"{n}{hf}.bias", f"{ours}.bias") for hf, ours in pairs]
    for hf, ours in (("input_layernorm", "attn_norm"), ("post_attention_layernorm", "mlp_norm")):
        rules += [families.one(f"{n}{hf}.{p}", f"{ours}.{p}") for p in ("weight", "bias")]
    return rules


def _presets() -> dict[str, zoo_models.ModelConfig]:
    tiny = zoo_models.ModelConfig(
        family="starcoder2",
        vocab_size=VOCAB,
        d_model=32,
        n_layers=2,
        n_heads=4,
        n_kv_heads=2,
        mlp_hidden=48,
        activation="gelu_tanh",
        mlp_gated=False,
        norm="layernorm",
        max_position=64,
        tie_embeddings=True,
        qkv_bias=True,
        out_bias=True,
        mlp_bias=True,
        sliding_window=4,
        bos_token_id=1,
        eos_token_id=2,
    )
    return {"starcoder2-tiny": tiny}


STARCODER2 = families.Family(
    name="starcoder2",
    architecture="Starcoder2ForCausalLM",
    read=_read,
    write=_write,
    hf_keys=_KEYS,
    top_rules=_top,
    layer_rules=_layer,
    presets=_presets,
    lora_targets=("q", "v"),
)


@pytest.fixture
def starcoder2() -> Iterator[families.Family]:
    family = families.register(STARCODER2)
    yield family
    families.unregister(family.name)


def _randomised(model: zoo_models.Transformer, seed: int) -> zoo_models.Transformer:
    """Every parameter drawn afresh (biases and norms too), so a misplaced tensor shows."""
    arrays, rest = eqx.partition(model, eqx.is_array)
    leaves, treedef = jax.tree.flatten(arrays)
    keys = jax.random.split(jax.random.key(seed), len(leaves))
    fresh = [
        0.3 * jax.random.normal(k, x.shape, x.dtype) for k, x in zip(keys, leaves, strict=True)
    ]
    return eqx.combine(jax.tree.unflatten(treedef, fresh), rest)


def _logits(model: zoo_models.Transformer, ids: np.ndarray) -> np.ndarray:
    positions = jnp.broadcast_to(jnp.arange(ids.shape[1]), ids.shape)
    run = eqx.filter_jit(lambda m, x, p: m(x, positions=p))  # compiled: cheaper than op by op
    return np.asarray(run(model, jnp.asarray(ids), positions))


# --- tests -----------------------------------------------------------------------------------


@pytest.mark.parametrize("family", families.registered(), ids=lambda f: f.name)
def test_every_family_has_presets_a_reader_and_a_writer(family: families.Family) -> None:
    presets = family.presets()
    assert presets and any(name.endswith("-tiny") for name in presets)
    assert all(c.family == family.name for c in presets.values())
    assert set(presets) <= set(zoo_models.presets())
    for config in presets.values():
        hf = zoo_models.to_hf_config(config)  # through family.write
        assert hf["model_type"] == family.name
        assert hf["architectures"] == [family.architecture]
        assert family.read(hf)["family"] == family.name
        # Read back and written again, it is the same config.json.
        assert zoo_models.to_hf_config(zoo_models.from_hf_config(hf)) == hf
    assert set(family.hf_keys) <= {f for f in zoo_models.ModelConfig.__dataclass_fields__}
    # Weight rules for the whole model, each leaf named once.
    tiny = next(c for name, c in presets.items() if name.endswith("-tiny"))
    leaves = [leaf for rule in family.top_rules(tiny) for leaf in rule.ours]
    leaves += [leaf for rule in family.layer_rules(tiny, 0) for leaf in rule.ours]
    assert leaves and len(leaves) == len(set(leaves))
    assert zoo_models.default_lora_targets(family.name) == family.lora_targets


def test_shipped_families_are_the_registered_ones() -> None:
    assert families.family_names() == zoo_models.FAMILIES
    assert families.model_types() == zoo_models.SUPPORTED_MODEL_TYPES
    names = [name for f in families.registered() for name in f.presets()]
    assert len(names) == len(set(names)) == len(zoo_models.presets())


def test_an_unregistered_family_is_refused_everywhere() -> None:
    hf = {"model_type": "starcoder2", "vocab_size": 8, "hidden_size": 8, "num_hidden_layers": 1}
    with pytest.raises(ValueError, match="model_type 'starcoder2'; supported model types: gpt2"):
        zoo_models.from_hf_config(hf)
    with pytest.raises(ValueError, match=r"`family` must be one of gpt2, .*got 'starcoder2'"):
        _presets()
    with pytest.raises(ValueError, match="unknown family 'starcoder2'; known families: gpt2"):
        families.lookup("starcoder2")


def test_a_family_registers_once(starcoder2: families.Family) -> None:
    with pytest.raises(ValueError, match="starcoder2 already registered"):
        families.register(starcoder2)
    with pytest.raises(ValueError, match="gemma3 already registered"):
        families.register(
            dataclasses.replace(starcoder2, name="starcoder2_vision", also_reads={"gemma3": _read})
        )
    assert "starcoder2_vision" not in families.family_names()


def test_registered_family_config_round_trips_and_names_its_keys(
    starcoder2: families.Family,
) -> None:
    config = zoo_models.get("starcoder2-tiny")
    assert "starcoder2-tiny" in zoo_models.presets()
    assert zoo_models.default_lora_targets(config) == ("q", "v")
    hf = zoo_models.to_hf_config(config)
    assert hf["norm_epsilon"] == config.norm_eps and hf["use_bias"] is True
    back = zoo_models.from_hf_config(hf)
    assert zoo_models.to_hf_config(back) == hf
    assert back.replace(head_dim=None) == config  # head_dim comes back resolved
    # A bad value is reported under this family's config.json key.
    with pytest.raises(ValueError, match="`norm_epsilon` must be a positive number"):
        zoo_models.from_hf_config({**hf, "norm_epsilon": -1.0})
    # What its config.json cannot say (a head width of its own) is refused on writing.
    with pytest.raises(ValueError, match="cannot express head_dim=16"):
        zoo_models.to_hf_config(config.replace(head_dim=16))


def test_registered_family_saves_loads_and_matches_transformers(
    starcoder2: families.Family, tmp_path
) -> None:
    """A fresh random model of the test family, written by save_hf, is transformers'
    Starcoder2ForCausalLM with the same logits; read back, it is the same model."""
    config = zoo_models.get("starcoder2-tiny").replace(
        compute_dtype="float32", attention_implementation="xla"
    )
    seed = int(np.random.default_rng().integers(1 << 30))
    model = _randomised(zoo_models.build(config, key=jax.random.key(0)), seed)
    ids = np.random.default_rng(seed).integers(0, VOCAB, size=(2, SEQ))
    zoo_models.save_hf(model, tmp_path)
    assert json.loads((tmp_path / "config.json").read_text())["model_type"] == "starcoder2"

    reference = transformers.AutoModelForCausalLM.from_pretrained(
        tmp_path, attn_implementation="eager", dtype=torch.float32
    ).eval()
    assert type(reference) is transformers.Starcoder2ForCausalLM
    want = hf_logits(reference, ids)
    err = float(np.abs(_logits(model, ids) - want).max())
    print(f"starcoder2 (seed {seed}): max |zoo - transformers| {err:.2e}")
    assert err < TOL

    again = zoo_models.load_hf(tmp_path, compute_dtype="float32", attention_implementation="xla")
    assert again.config == config
    for a, b in zip(jax.tree.leaves(again), jax.tree.leaves(model), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
