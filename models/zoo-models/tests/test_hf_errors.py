"""Bad checkpoints and configs fail with one clear message naming what is wrong."""

from __future__ import annotations

import json

import jax
import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

import zoo_models


@pytest.fixture(scope="module")
def tiny_model() -> zoo_models.Transformer:
    config = zoo_models.get("llama-tiny").replace(n_layers=2, vocab_size=64, max_position=64)
    return zoo_models.build(config, key=jax.random.key(0))


def _saved(model: zoo_models.Transformer, path):
    zoo_models.save_hf(model, path)
    return load_file(path / "model.safetensors")


def test_missing_tensor(tiny_model, tmp_path) -> None:
    tensors = _saved(tiny_model, tmp_path)
    del tensors["model.layers.1.mlp.up_proj.weight"]
    save_file(tensors, tmp_path / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(
        ValueError, match=r"missing tensor\(s\) model\.layers\.1\.mlp\.up_proj\.weight \(128, 64\)"
    ):
        zoo_models.load_hf(tmp_path)


def test_wrong_shape(tiny_model, tmp_path) -> None:
    tensors = _saved(tiny_model, tmp_path)
    tensors["model.layers.0.self_attn.k_proj.weight"] = np.zeros((8, 64), np.float32)
    save_file(tensors, tmp_path / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(
        ValueError,
        match=r"model\.layers\.0\.self_attn\.k_proj\.weight has shape \(8, 64\), expected \(32, 64\)",
    ):
        zoo_models.load_hf(tmp_path)


def test_unexpected_tensor(tiny_model, tmp_path) -> None:
    tensors = _saved(tiny_model, tmp_path)
    tensors["model.layers.0.self_attn.q_norm.weight"] = np.ones((16,), np.float32)
    save_file(tensors, tmp_path / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(
        ValueError, match=r"unexpected tensor\(s\) model\.layers\.0\.self_attn\.q_norm\.weight"
    ):
        zoo_models.load_hf(tmp_path)


def test_unknown_model_type(tiny_model, tmp_path) -> None:
    zoo_models.save_hf(tiny_model, tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**config, "model_type": "mamba"}))
    with pytest.raises(ValueError, match=r"'mamba'.*gpt2, llama, mistral, qwen2, gemma2"):
        zoo_models.load_hf(tmp_path)


def test_unsupported_rope_type(tiny_model, tmp_path) -> None:
    zoo_models.save_hf(tiny_model, tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    config["rope_parameters"] = {"rope_type": "yarn", "factor": 4.0, "rope_theta": 1e4}
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match="rope type 'yarn'"):
        zoo_models.load_hf(tmp_path)


def test_missing_directory_and_files(tiny_model, tmp_path) -> None:
    with pytest.raises(ValueError, match="does not exist"):
        zoo_models.load_hf(tmp_path / "nowhere")
    with pytest.raises(ValueError, match=r"config\.json"):
        zoo_models.load_hf(tmp_path)
    zoo_models.save_hf(tiny_model, tmp_path)
    (tmp_path / "model.safetensors").unlink()
    with pytest.raises(ValueError, match=r"model\.safetensors"):
        zoo_models.load_hf(tmp_path)


def test_save_refuses_what_the_family_cannot_express(tmp_path) -> None:
    config = zoo_models.get("llama-tiny").replace(sliding_window=8)
    model = zoo_models.build(config, key=jax.random.key(0))
    with pytest.raises(
        ValueError, match=r"llama config cannot express sliding_window=8, window_pattern=\(True,\)"
    ):
        zoo_models.save_hf(model, tmp_path)
    assert not (tmp_path / "config.json").exists()
    with pytest.raises(ValueError, match="max_shard_size"):
        zoo_models.save_hf(
            zoo_models.build(zoo_models.get("gpt2-tiny"), key=jax.random.key(0)),
            tmp_path,
            max_shard_size="big",
        )


def test_bare_gpt2_names_load(tmp_path) -> None:
    # The original GPT-2 checkpoints name tensors without the "transformer." prefix and carry
    # attention-mask buffers.
    model = zoo_models.build(zoo_models.get("gpt2-tiny"), key=jax.random.key(1))
    tensors = _saved(model, tmp_path)
    bare = {k.removeprefix("transformer."): v for k, v in tensors.items()}
    bare["h.0.attn.bias"] = np.tril(np.ones((1, 1, 8, 8), np.float32))
    (tmp_path / "model.safetensors").unlink()
    save_file(bare, tmp_path / "model.safetensors", metadata={"format": "pt"})
    loaded = zoo_models.load_hf(tmp_path)
    for a, b in zip(jax.tree.leaves(loaded), jax.tree.leaves(model), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
