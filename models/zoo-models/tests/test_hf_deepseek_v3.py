"""DeepSeek-V3 against ``transformers``: the router's choices and weights (sigmoid scores, the
correction bias, group-limited top-k, the routed scaling factor), a checkpoint with a
multi-token-prediction layer (left out on load with one line, absent from the export), and a
decoding cache that holds latents. (Logits, gradients, the round trip and greedy generation
are in test_hf_parity.py and test_hf_gradients.py.)"""

from __future__ import annotations

import json
import logging

import equinox as eqx
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from _hf_tiny import SEQ, VOCAB, hf_logits, make_hf_model
from safetensors.numpy import load_file, save_file

import zoo_models
from zoo_layers.moe import route


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    path = tmp_path_factory.mktemp("deepseek")
    return make_hf_model("deepseek-v3", path), zoo_models.load_hf(path), path


def test_router_choices_and_weights_equal_transformers(pair) -> None:
    reference, model, _ = pair
    gate = reference.model.layers[1].mlp.gate
    config = model.config
    hidden = torch.as_tensor(
        np.random.default_rng(5).standard_normal((64, 32)), dtype=torch.float32
    )
    with torch.no_grad():
        logits, weights, experts = gate(hidden)
    bias = np.asarray(model.stack.layer(1).mlp.correction_bias)
    np.testing.assert_array_equal(bias, gate.e_score_correction_bias.numpy())
    got_w, got_e = route(
        jnp.asarray(logits.numpy()),
        config.experts_per_token,
        normalize=config.normalize_expert_weights,
        scoring="sigmoid",
        correction_bias=jnp.asarray(bias),
        groups=config.expert_groups,
        group_top_k=config.expert_group_top_k,
        scale=config.routed_scaling_factor,
    )
    # transformers returns them unsorted: compare each token's set of (expert, weight).
    want = {
        (t, int(e)): float(w)
        for t in range(64)
        for e, w in zip(experts[t], weights[t], strict=True)
    }
    got = {
        (t, int(e)): float(w) for t in range(64) for e, w in zip(got_e[t], got_w[t], strict=True)
    }
    assert want.keys() == got.keys()
    assert max(abs(want[k] - got[k]) for k in want) < 1e-6
    # The groups bind: some token's best expert by score lies outside its chosen groups.
    scores = 1 / (1 + np.exp(-logits.numpy())) + bias
    assert any(int(np.argmax(scores[t])) not in {e for (u, e) in got if u == t} for t in range(64))


def test_multi_token_prediction_layer_is_left_out_with_one_line(pair, tmp_path, caplog) -> None:
    reference, model, path = pair
    tensors = load_file(path / "model.safetensors")
    n = model.config.n_layers
    # An MTP module as DeepSeek-V3 ships it: a decoder layer at index n and its own extras.
    extra = {
        k.replace(f"layers.{n - 1}.", f"layers.{n}."): v
        for k, v in tensors.items()
        if k.startswith(f"model.layers.{n - 1}.")
    }
    extra[f"model.layers.{n}.eh_proj.weight"] = np.zeros((32, 64), np.float32)
    extra[f"model.layers.{n}.enorm.weight"] = np.ones(32, np.float32)
    mtp = tmp_path / "mtp"
    mtp.mkdir()
    save_file({**tensors, **extra}, mtp / "model.safetensors", metadata={"format": "pt"})
    config = json.loads((path / "config.json").read_text())
    (mtp / "config.json").write_text(json.dumps({**config, "num_nextn_predict_layers": 1}))
    with caplog.at_level(logging.WARNING, logger="zoo_models"):
        loaded = zoo_models.load_hf(mtp)
    lines = [r.getMessage() for r in caplog.records if "multi-token-prediction" in r.getMessage()]
    assert len(lines) == 1 and f"{len(extra)} multi-token-prediction tensor(s)" in lines[0]
    ids = np.random.default_rng(6).integers(0, VOCAB, size=(2, SEQ))
    logits = eqx.filter_jit(lambda m, x: m(x))(loaded, jnp.asarray(ids))
    assert np.abs(np.asarray(logits) - hf_logits(reference, ids)).max() < 1e-4
    out = zoo_models.save_hf(loaded, tmp_path / "export")
    assert json.loads((out / "config.json").read_text())["num_nextn_predict_layers"] == 0
    assert not any(k.startswith(f"model.layers.{n}.") for k in load_file(out / "model.safetensors"))


def test_the_decoding_cache_holds_latents_not_keys_and_values(pair) -> None:
    _, model, _ = pair
    c = model.config
    cache = model.init_cache(2, 24)
    assert cache.key.shape == (c.n_layers, 2, 24, 1, c.kv_lora_rank)
    assert cache.value.shape == (c.n_layers, 2, 24, 1, c.rope_head_dim)
    # What expanded keys and values would take, per token and layer: N * (H + Hv) numbers.
    per_token = cache.key.shape[-1] + cache.value.shape[-1]
    assert per_token < c.n_heads * (c.dim_per_head + c.value_dim)
