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
    config["rope_parameters"] = {"rope_type": "longrope", "factor": 4.0, "rope_theta": 1e4}
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match="rope type 'longrope'"):
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


def _sharded_index(directory, weight_map) -> None:
    index = {"metadata": {"total_size": 0}, "weight_map": weight_map}
    (directory / "model.safetensors.index.json").write_text(json.dumps(index))


@pytest.mark.parametrize("form", ["relative", "absolute"])
def test_index_naming_a_shard_outside_the_directory_is_refused(tiny_model, tmp_path, form):
    model_dir, outside = tmp_path / "model", tmp_path / "other"
    tensors = _saved(tiny_model, model_dir)
    zoo_models.save_hf(tiny_model, outside)  # a valid file the index must not reach
    (model_dir / "model.safetensors").unlink()
    shard = (
        "../other/model.safetensors" if form == "relative" else str(outside / "model.safetensors")
    )
    _sharded_index(model_dir, dict.fromkeys(tensors, shard))
    with pytest.raises(ValueError, match="outside the model directory"):
        zoo_models.load_hf(model_dir)


def test_index_and_config_of_the_wrong_json_type_are_refused(tiny_model, tmp_path):
    tensors = _saved(tiny_model, tmp_path)
    config = (tmp_path / "config.json").read_text()
    (tmp_path / "config.json").write_text(json.dumps([json.loads(config)]))
    with pytest.raises(ValueError, match=r"config\.json holds a JSON list"):
        zoo_models.load_hf(tmp_path)
    (tmp_path / "config.json").write_text(config)
    _sharded_index(tmp_path, [[name, "model.safetensors"] for name in tensors])
    with pytest.raises(ValueError, match="'weight_map' is a list"):
        zoo_models.load_hf(tmp_path)


def _truncated(data: bytes, rng) -> bytes:
    return data[: int(rng.integers(9, len(data) - 1))]


def _empty(data: bytes, rng) -> bytes:
    return b""


def _lying_header(data: bytes, rng) -> bytes:
    # The header's length field claims more bytes than the file has.
    size = int.from_bytes(data[:8], "little")
    return (size + int(rng.integers(1, 1000))).to_bytes(8, "little") + data[8:]


def _lying_offsets(data: bytes, rng) -> bytes:
    # A well-formed header whose tensors' offsets run past the end of the data.
    size = int.from_bytes(data[:8], "little")
    header = json.loads(data[8 : 8 + size])
    for name, info in header.items():
        if name != "__metadata__":
            info["data_offsets"] = [o + 10**6 for o in info["data_offsets"]]
    text = json.dumps(header).encode()
    return len(text).to_bytes(8, "little") + text + data[8 + size :]


@pytest.mark.parametrize("damage", [_truncated, _empty, _lying_header, _lying_offsets])
def test_damaged_safetensors_is_one_sentence_naming_the_file(tiny_model, tmp_path, damage):
    zoo_models.save_hf(tiny_model, tmp_path)
    file = tmp_path / "model.safetensors"
    file.write_bytes(damage(file.read_bytes(), np.random.default_rng()))
    with pytest.raises(ValueError, match=r"model\.safetensors") as info:
        zoo_models.load_hf(tmp_path)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("dtype", [np.int32, np.bool_])
def test_integer_and_bool_tensors_are_refused(tiny_model, tmp_path, dtype):
    tensors = _saved(tiny_model, tmp_path)
    name = "model.layers.0.mlp.up_proj.weight"
    tensors[name] = np.random.default_rng().integers(0, 2, tensors[name].shape).astype(dtype)
    save_file(tensors, tmp_path / "model.safetensors", metadata={"format": "pt"})
    kind = np.dtype(dtype).name
    with pytest.raises(ValueError, match=rf"{name} holds {kind} values, not float16/bfloat16"):
        zoo_models.load_hf(tmp_path)


def test_float16_is_cast_with_a_note(tiny_model, tmp_path, caplog):
    tensors = _saved(tiny_model, tmp_path)
    halves = {k: v.astype(np.float16) for k, v in tensors.items()}
    save_file(halves, tmp_path / "model.safetensors", metadata={"format": "pt"})
    with caplog.at_level("WARNING", logger="zoo_models"):
        loaded = zoo_models.load_hf(tmp_path, dtype="float32")
    assert f"{len(tensors)} tensor(s) stored as float16 are cast to float32" in caplog.text
    got = zoo_models.hf_state_dict(loaded)
    for name, half in halves.items():
        np.testing.assert_array_equal(got[name], half.astype(np.float32), err_msg=name)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_weights_are_refused_by_name(tiny_model, tmp_path, bad):
    tensors = _saved(tiny_model, tmp_path)
    rng = np.random.default_rng()
    name = sorted(tensors)[int(rng.integers(len(tensors)))]
    flat = tensors[name].reshape(-1)
    flat[int(rng.integers(flat.size))] = bad
    save_file(tensors, tmp_path / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(ValueError, match=rf"tensor {name} holds NaN or infinite values"):
        zoo_models.load_hf(tmp_path)


@pytest.mark.parametrize(
    ("family", "change", "named"),
    [
        ("llama-tiny", {"hidden_size": -8}, "`hidden_size` must be a positive int, got -8"),
        ("qwen2-tiny", {"num_key_value_heads": 3}, "of `num_key_value_heads` (3)"),
        ("gemma2-tiny", {"intermediate_size": "wide"}, "`intermediate_size` must be a positive"),
        ("mistral-tiny", {"rms_norm_eps": 0}, "`rms_norm_eps` must be a positive number"),
        ("gpt2-tiny", {"n_embd": 0}, "`n_embd` must be a positive int, got 0"),
        ("gpt2-tiny", {"layer_norm_epsilon": "tiny"}, "`layer_norm_epsilon` must be a number"),
        ("llama-tiny", {"hidden_act": "swishy"}, "unsupported `hidden_act` 'swishy'"),
        ("qwen3-tiny", {"hidden_size": 0}, "`hidden_size` must be a positive int, got 0"),
        ("gemma3-tiny", {"rms_norm_eps": -1.0}, "`rms_norm_eps` must be a positive number"),
        ("olmo2-tiny", {"num_hidden_layers": -2}, "`num_hidden_layers` must be a positive int"),
        ("mixtral-tiny", {"num_experts_per_tok": 9}, "has num_experts_per_tok 9 for 8 experts"),
        ("qwen3-moe-tiny", {"moe_intermediate_size": -4}, "`moe_intermediate_size` must be a"),
    ],
)
def test_config_errors_name_config_json_keys(tmp_path, family, change, named) -> None:
    # The user edits config.json, so its keys are named (hidden_size), not zoo's (d_model),
    # with the file's path. The config is read before any weight: the file save_hf writes
    # (to_hf_config's, test_hf_config.py) is enough, with no model built.
    hf = zoo_models.to_hf_config(zoo_models.get(family))
    (tmp_path / "config.json").write_text(json.dumps({**hf, **change}))
    with pytest.raises(ValueError, match=r"config\.json: ") as raised:
        zoo_models.load_hf(tmp_path)
    message = str(raised.value)
    assert message.startswith(f"{tmp_path / 'config.json'}: ") and named in message, message
    zoo_names = ("`d_model`", "`n_kv_heads`", "`mlp_hidden`", "`norm_eps`", "`activation`",
                 "`n_layers`", "`experts_per_token`", "`expert_hidden`")  # fmt: skip
    for zoo_name in zoo_names:
        assert zoo_name not in message, message
    # A change the caller asks for is still named as zoo names it.
    with pytest.raises(ValueError, match="`dropout` must be in"):
        zoo_models.from_hf_config(hf, dropout=2.0)


def test_a_shape_mismatch_names_the_first_few_tensors(tiny_model, tmp_path) -> None:
    zoo_models.save_hf(tiny_model, tmp_path)
    hf = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**hf, "hidden_size": 32, "head_dim": 8}))
    with pytest.raises(ValueError, match="does not match its llama config") as raised:
        zoo_models.load_hf(tmp_path)
    message = str(raised.value)
    assert message.count("has shape") == 3 and " more." in message and len(message) < 600
