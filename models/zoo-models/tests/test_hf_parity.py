"""Logits parity with Hugging Face ``transformers`` (PyTorch, CPU, float32, eager attention)."""

from __future__ import annotations

import json

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
import transformers
from _hf_tiny import CONFIGS, SEQ, VOCAB, hf_logits, make_hf_model

import zoo_models

TOL = 1e-4


@eqx.filter_jit
def _forward(
    model: zoo_models.Transformer, ids: jnp.ndarray, positions: jnp.ndarray
) -> jnp.ndarray:
    return model(ids, positions=positions)


def _zoo_logits(
    model: zoo_models.Transformer, ids: np.ndarray, positions: np.ndarray
) -> np.ndarray:
    return np.asarray(_forward(model, jnp.asarray(ids), jnp.asarray(positions, jnp.int32)))


def _ids(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, VOCAB, size=(2, SEQ))


def _logits_error(label: str, model, reference, ids: np.ndarray) -> tuple[float, np.ndarray]:
    """Max |zoo - transformers| of the logits of ``ids`` (printed), and transformers' logits."""
    want = hf_logits(reference, ids)
    got = _zoo_logits(model, ids, np.broadcast_to(np.arange(SEQ), ids.shape))
    err = float(np.abs(got - want).max())
    print(f"{label}: load_hf logits max |diff| {err:.2e} (logit scale {np.abs(want).max():.2f})")
    return err, want


@pytest.mark.parametrize("name", list(CONFIGS))
def test_load_save_round_trip_matches_transformers(name: str, tmp_path) -> None:
    hf_dir, zoo_dir = tmp_path / "hf", tmp_path / "zoo"
    reference = make_hf_model(name, hf_dir)
    model = zoo_models.load_hf(hf_dir)
    assert model.config.family == reference.config.model_type

    ids = _ids(1)
    err, want = _logits_error(name, model, reference, ids)
    assert err < TOL
    got = _zoo_logits(model, ids, np.broadcast_to(np.arange(SEQ), ids.shape))

    # Positions far from 0 exercise the rotary (or learned) position tables.
    positions = np.broadcast_to(np.arange(SEQ) + 37, ids.shape).copy()
    err_pos = np.abs(
        _zoo_logits(model, ids, positions) - hf_logits(reference, ids, positions)
    ).max()
    assert err_pos < TOL

    # save_hf, sharded, loads in transformers and gives the same logits.
    zoo_models.save_hf(model, zoo_dir, max_shard_size="8KB")
    index = json.loads((zoo_dir / "model.safetensors.index.json").read_text())
    assert len(set(index["weight_map"].values())) > 1
    config = json.loads((zoo_dir / "config.json").read_text())
    assert config["model_type"] == reference.config.model_type
    assert config["architectures"] == [type(reference).__name__]
    reloaded = transformers.AutoModelForCausalLM.from_pretrained(
        zoo_dir, attn_implementation="eager", dtype=torch.float32
    ).eval()
    assert type(reloaded) is type(reference)
    err_rt = np.abs(hf_logits(reloaded, ids) - want).max()
    print(f"{name}: save_hf -> transformers max |diff| {err_rt:.2e}")
    assert err_rt < TOL
    # The state dicts agree tensor by tensor (ties included).
    want_sd, got_sd = reference.state_dict(), reloaded.state_dict()
    assert set(want_sd) == set(got_sd)
    for key, value in want_sd.items():
        torch.testing.assert_close(got_sd[key], value, rtol=0, atol=0, msg=key)

    # And the sharded checkpoint loads back here to the same model.
    again = zoo_models.load_hf(zoo_dir)
    assert again.config == model.config
    np.testing.assert_array_equal(
        _zoo_logits(again, ids, np.broadcast_to(np.arange(SEQ), ids.shape)), got
    )


@pytest.mark.parametrize("layout", ["as saved", "model.language_model"])
def test_language_model_of_an_image_text_gemma3_loads(tmp_path, layout: str) -> None:
    """The text model inside a ``gemma3`` checkpoint (vision tower left out) gives the image-and-
    text model's logits on text; it is written back as a ``gemma3_text`` checkpoint."""
    from safetensors.torch import load_file, save_file

    hf_dir = tmp_path / "hf"
    reference = make_hf_model("gemma3-image-text", hf_dir)
    if layout != "as saved":
        # transformers 5 reads the language model under either prefix; both are in use.
        tensors = load_file(hf_dir / "model.safetensors")
        renamed = {
            k.replace("language_model.model.", "model.language_model.").replace(
                "vision_tower.", "model.vision_tower."
            ): v
            for k, v in tensors.items()
        }
        save_file(renamed, hf_dir / "model.safetensors", metadata={"format": "pt"})
    model = zoo_models.load_hf(hf_dir)
    assert model.config.family == "gemma3_text"
    assert model.config.eos_token_ids == (2, 5) and model.config.period == 2
    ids = _ids(2)
    err, want = _logits_error(f"gemma3 image-text ({layout})", model, reference, ids)
    assert err < TOL
    zoo_models.save_hf(model, tmp_path / "text")
    text = transformers.AutoModelForCausalLM.from_pretrained(
        tmp_path / "text", attn_implementation="eager", dtype=torch.float32
    ).eval()
    assert type(text).__name__ == "Gemma3ForCausalLM"
    assert text.config.eos_token_id == [2, 5]  # config.json keeps the whole list
    assert np.abs(hf_logits(text, ids) - want).max() < TOL


def test_bfloat16_load_and_save(tmp_path) -> None:
    reference = make_hf_model("llama3", tmp_path / "hf")
    model = zoo_models.load_hf(tmp_path / "hf", dtype="bfloat16")
    assert model.config.param_dtype == "bfloat16"
    assert model.embed.weight.dtype == jnp.bfloat16
    zoo_models.save_hf(model, tmp_path / "zoo")
    assert json.loads((tmp_path / "zoo" / "config.json").read_text())["dtype"] == "bfloat16"
    reloaded = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "zoo")
    assert reloaded.dtype == torch.bfloat16
    want = reference.model.embed_tokens.weight.detach().to(torch.bfloat16)
    torch.testing.assert_close(reloaded.model.embed_tokens.weight, want, rtol=0, atol=0)
    # dtype=None keeps the dtype the checkpoint declares.
    assert zoo_models.load_hf(tmp_path / "zoo").config.param_dtype == "bfloat16"


def test_transformers_sharded_checkpoint_loads(tmp_path) -> None:
    reference = make_hf_model("gemma2", tmp_path / "one")
    reference.save_pretrained(tmp_path / "sharded", max_shard_size="10KB")
    index = json.loads((tmp_path / "sharded" / "model.safetensors.index.json").read_text())
    assert len(set(index["weight_map"].values())) > 1
    whole = zoo_models.load_hf(tmp_path / "one")
    sharded = zoo_models.load_hf(tmp_path / "sharded")
    assert sharded.config == whole.config
    for a, b in zip(jax.tree.leaves(sharded), jax.tree.leaves(whole), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    # And the values are the transformers parameters themselves.
    np.testing.assert_array_equal(
        np.asarray(sharded.embed.weight), reference.model.embed_tokens.weight.detach().numpy()
    )


@pytest.mark.parametrize(
    "name",
    [
        # A window from layer 1 on decodes as [gemma3-untied]'s local layers do.
        pytest.param("qwen3-sliding", marks=pytest.mark.full),
        "gemma3-untied",
        # Dense GQA decoding as [gemma3-untied] (and per family in test_models_decode.py).
        pytest.param("olmo2-gqa", marks=pytest.mark.full),
        "mixtral",
        # Expert layers in decoding as [mixtral].
        pytest.param("qwen3-moe", marks=pytest.mark.full),
        # Both Qwen3.5s: test_qwen3_5.py's greedy generation from left-padded prompts.
        pytest.param("qwen3.5", marks=pytest.mark.full),
        pytest.param("qwen3.5-moe", marks=pytest.mark.full),
        "gpt-oss",
        "deepseek-v3",
    ],
)
def test_greedy_generation_matches_transformers(name: str, tmp_path) -> None:
    """Cached greedy decoding, past the sliding windows, gives transformers' tokens; both stop
    at the checkpoint's EOS. (gpt-oss: sinks in every step; DeepSeek-V3: a cache of latents.)"""
    reference = make_hf_model(name, tmp_path)
    model = zoo_models.load_hf(tmp_path)
    prompt = np.random.default_rng(3).integers(3, VOCAB, size=(2, 5))
    new = 14
    with torch.no_grad():
        theirs = reference.generate(
            torch.as_tensor(prompt), do_sample=False, max_new_tokens=new, min_new_tokens=0
        ).numpy()
    stops = zoo_models.stop_token_ids(zoo_models.read_generation_config(tmp_path))
    assert stops == (2,)
    ours = np.asarray(
        zoo_models.generate(
            model, jnp.asarray(prompt), max_new_tokens=new, greedy=True, stop_tokens=stops
        )
    )

    def until_stop(row: np.ndarray) -> list[int]:
        out = row[prompt.shape[1] :].tolist()
        return out[: out.index(2) + 1] if 2 in out else out

    for a, b in zip(ours, theirs, strict=True):
        assert until_stop(a) == until_stop(b)
    print(f"{name}: greedy tokens {[until_stop(b) for b in theirs]}")
    assert max(len(until_stop(b)) for b in theirs) > 4  # past the sliding windows (3, 4)
