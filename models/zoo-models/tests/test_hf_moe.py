"""Mixtral and Qwen3-MoE against ``transformers``: the router logits and the load-balancing loss
(padding left out), and checkpoints whose experts the config cannot hold or whose expert weights
are missing or misshapen, refused by name. (Logits and the save_hf round trip are in
test_hf_parity.py, with greedy generation.)"""

from __future__ import annotations

import json

import equinox as eqx
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from _hf_tiny import SEQ, VOCAB, make_hf_model
from safetensors.numpy import load_file, save_file

import zoo_models


@eqx.filter_jit
def _router(model, ids, segment_ids):
    return model.logits_and_router(ids, segment_ids=segment_ids, keep_logits=True)


@pytest.fixture(scope="module", params=["mixtral", "qwen3-moe", "qwen3-moe-dense-first"])
def pair(request, tmp_path_factory):
    path = tmp_path_factory.mktemp(request.param)
    return request.param, make_hf_model(request.param, path), zoo_models.load_hf(path), path


def test_router_logits_and_load_balancing_loss_equal_transformers(pair) -> None:
    name, reference, model, _ = pair
    ids = np.random.default_rng(4).integers(0, VOCAB, size=(2, SEQ))
    mask = np.ones_like(ids)
    mask[1, SEQ - 5 :] = 0  # right padding: transformers leaves it out of the loss
    for attention in (None, mask):
        with torch.no_grad():
            out = reference(
                torch.as_tensor(ids),
                attention_mask=None if attention is None else torch.as_tensor(attention),
                output_router_logits=True,
            )
        # Segment id 0 is padding here (zoo_train's packing); one document otherwise.
        segments = jnp.asarray(np.ones_like(ids) if attention is None else attention)
        _, stats = _router(model, jnp.asarray(ids), segments)
        want = [t.numpy() for t in out.router_logits]
        assert len(want) == len(model.config.moe_layers) == stats.logits.shape[0]
        real = (np.ones_like(ids) if attention is None else attention).reshape(-1) > 0
        for got, theirs in zip(np.asarray(stats.logits), want, strict=True):
            diff = np.abs(got.reshape(theirs.shape) - theirs)[real].max()
            assert diff < 1e-5, diff
        aux = float(stats.aux_loss())
        print(f"{name}: aux loss {aux:.6f}, transformers {float(out.aux_loss):.6f}")
        np.testing.assert_allclose(aux, float(out.aux_loss), rtol=1e-5)


def _rewrite(path, out, change=None, tensors=None):
    out.mkdir()
    config = json.loads((path / "config.json").read_text())
    (out / "config.json").write_text(json.dumps({**config, **(change or {})}))
    weights = load_file(path / "model.safetensors")
    save_file(tensors(weights) if tensors else weights, out / "model.safetensors")
    return out


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"num_experts_per_tok": 5}, r"num_experts_per_tok 5 for 4 experts \(num_local_experts\)"),
        ({"num_local_experts": 0}, r"num_local_experts 0; .*at least 1"),
        ({"router_jitter_noise": 0.1}, r"router_jitter_noise 0.1, which is not supported"),
    ],
    ids=["top-k", "no-experts", "jitter"],
)
def test_expert_settings_the_layer_cannot_have_are_refused(change, message, tmp_path) -> None:
    make_hf_model("mixtral", tmp_path / "hf")
    bad = _rewrite(tmp_path / "hf", tmp_path / "bad", change=change)
    with pytest.raises(ValueError, match=message):
        zoo_models.load_hf(bad)


def test_missing_or_misshapen_expert_weights_are_named(tmp_path) -> None:
    make_hf_model("qwen3-moe", tmp_path / "hf")
    p = "model.layers.1.mlp.experts"

    def drop(t):
        return {k: v for k, v in t.items() if k != f"{p}.3.up_proj.weight"}

    def reshape(t):
        return {**t, f"{p}.6.down_proj.weight": np.zeros((32, 12), np.float32)}

    with pytest.raises(
        ValueError, match=rf"missing tensor\(s\) {p}\.3\.up_proj\.weight \(24, 32\)"
    ):
        zoo_models.load_hf(_rewrite(tmp_path / "hf", tmp_path / "a", tensors=drop))
    with pytest.raises(
        ValueError, match=rf"{p}\.6\.down_proj\.weight has shape \(32, 12\), expected \(32, 24\)"
    ):
        zoo_models.load_hf(_rewrite(tmp_path / "hf", tmp_path / "b", tensors=reshape))
