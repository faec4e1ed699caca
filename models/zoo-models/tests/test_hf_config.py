"""config.json mapping: every preset writes a config transformers accepts and reads back."""

from __future__ import annotations

import jax
import pytest
import transformers

import zoo_layers
import zoo_models

_SHAPE_KEYS = {
    "gpt2": {
        "n_embd": "d_model",
        "n_layer": "n_layers",
        "n_head": "n_heads",
        "vocab_size": "vocab_size",
    },
    "llama": {
        "hidden_size": "d_model",
        "num_hidden_layers": "n_layers",
        "num_attention_heads": "n_heads",
    },
}


@pytest.mark.parametrize("name", zoo_models.presets())
def test_presets_round_trip_through_transformers_config(name: str) -> None:
    config = zoo_models.get(name)
    hf = zoo_models.to_hf_config(config)
    # transformers' own (strict) config class accepts it and agrees on the architecture.
    tf_config = transformers.AutoConfig.for_model(**hf)
    assert tf_config.model_type == config.family
    keys = _SHAPE_KEYS["gpt2" if config.family == "gpt2" else "llama"]
    for hf_key, ours in keys.items():
        assert getattr(tf_config, hf_key) == getattr(config, ours), hf_key
    if config.family != "gpt2":
        assert tf_config.num_key_value_heads == config.kv_heads
        if config.kv_lora_rank is None:
            assert tf_config.head_dim == config.dim_per_head
        else:  # latent attention: transformers' head_dim is the rotary part
            assert (tf_config.qk_head_dim, tf_config.head_dim) == (
                config.dim_per_head,
                config.rope_head_dim,
            )
        rope = tf_config.rope_parameters
        if config.family == "gemma3_text":
            # Per layer type: the local layers' own base, unscaled.
            assert rope["sliding_attention"]["rope_theta"] == config.rope_local_theta
            assert rope["sliding_attention"]["rope_type"] == "default"
            rope = rope["full_attention"]
        assert rope["rope_theta"] == config.rope_theta
        kind = {"none": "default"}.get(config.rope_scaling, config.rope_scaling)
        assert rope["rope_type"] == kind
    layer_types = getattr(tf_config, "layer_types", None)
    if config.family in ("gemma2", "qwen2", "qwen3", "gemma3_text"):
        assert layer_types == [
            "sliding_attention" if config.layer_window(i) else "full_attention"
            for i in range(config.n_layers)
        ]
    if config.family == "mistral":
        assert tf_config.sliding_window == config.sliding_window
    # Reading it back gives a model of the same architecture.
    back = zoo_models.from_hf_config(hf)
    assert back.family == config.family
    assert zoo_models.num_params(back) == zoo_models.num_params(config)
    assert [back.layer_window(i) for i in range(back.n_layers)] == [
        config.layer_window(i) for i in range(config.n_layers)
    ]
    assert back.attention_scale == pytest.approx(config.attention_scale)
    assert back.rope == config.rope or config.positional == "learned"


def test_legacy_rope_layout_is_read() -> None:
    hf = zoo_models.to_hf_config(zoo_models.get("llama-tiny"))
    del hf["rope_parameters"]
    hf["rope_theta"] = 1234.0
    hf["rope_scaling"] = {"type": "linear", "factor": 2.5}
    config = zoo_models.from_hf_config(hf)
    assert (config.rope_theta, config.rope_scaling, config.rope_factor) == (1234.0, "linear", 2.5)


def test_runtime_changes_and_bad_changes() -> None:
    hf = zoo_models.to_hf_config(zoo_models.get("gemma2-tiny"))
    config = zoo_models.from_hf_config(hf, remat=True, attention_implementation="xla")
    assert config.remat and config.attention_implementation == "xla"
    with pytest.raises(ValueError, match="cannot override n_layers"):
        zoo_models.from_hf_config(hf, n_layers=3)


def test_out_of_vocab_special_ids_are_dropped() -> None:
    model = zoo_models.build(zoo_models.get("gpt2-tiny"), key=jax.random.key(0))
    hf = {**zoo_models.to_hf_config(model.config), "bos_token_id": 50256, "eos_token_id": [3, 4]}
    config = zoo_models.from_hf_config(hf)
    assert (config.bos_token_id, config.eos_token_id) == (None, 3)


def test_gemma3_layouts_and_defaults_are_read_as_transformers_reads_them() -> None:
    # The published image-and-text checkpoints write only what differs from Gemma3TextConfig's
    # defaults, with the older rope keys; transformers fills in the rest.
    sparse = {
        "model_type": "gemma3",
        "eos_token_id": [1, 106],
        "text_config": {
            "model_type": "gemma3_text",
            "hidden_size": 2560,
            "intermediate_size": 10240,
            "num_hidden_layers": 34,
            "rope_scaling": {"factor": 8.0, "rope_type": "linear"},
            "sliding_window": 1024,
        },
    }
    config = zoo_models.from_hf_config(sparse)
    theirs = transformers.Gemma3Config(**{k: v for k, v in sparse.items() if k != "model_type"})
    text = theirs.text_config
    assert config.family == "gemma3_text" and config.eos_token_ids == (1, 106)
    assert (config.vocab_size, config.n_heads, config.kv_heads, config.dim_per_head) == (
        text.vocab_size, text.num_attention_heads, text.num_key_value_heads, text.head_dim
    )  # fmt: skip
    assert [config.layer_window(i) is not None for i in range(34)] == [
        t == "sliding_attention" for t in text.layer_types
    ]
    assert (config.period, config.n_layers % config.period) == (6, 4)  # a tail of 4 layers
    full, local = text.rope_parameters["full_attention"], text.rope_parameters["sliding_attention"]
    assert (config.rope_theta, config.rope_scaling, config.rope_factor) == (
        full["rope_theta"], full["rope_type"], full["factor"]
    )  # fmt: skip
    assert config.rope_local_theta == local["rope_theta"]
    assert config.layer_rope(0) == (local["rope_theta"], zoo_layers.RopeScaling())  # unscaled
    assert config.layer_rope(5) == (full["rope_theta"], config.rope)
    assert zoo_models.num_params(config) == zoo_models.num_params(zoo_models.get("gemma-3-4b"))
    with pytest.raises(ValueError, match="use_bidirectional_attention"):
        zoo_models.from_hf_config(
            {"model_type": "gemma3_text", "use_bidirectional_attention": True}
        )


def test_a_family_that_cannot_express_a_field_is_refused() -> None:
    olmo = zoo_models.get("olmo2-tiny")
    with pytest.raises(ValueError, match="cannot express sliding_window=8"):
        zoo_models.to_hf_config(olmo.replace(sliding_window=8))
    qwen = zoo_models.get("qwen3-tiny")
    with pytest.raises(ValueError, match="cannot express qk_norm='projection'"):
        zoo_models.to_hf_config(qwen.replace(qk_norm="projection"))
    with pytest.raises(ValueError, match=r"cannot express rope_local_theta=50\.0"):
        zoo_models.to_hf_config(zoo_models.get("mistral-tiny").replace(rope_local_theta=50.0))


def test_qwen2_window_layers_without_layer_types() -> None:
    hf = zoo_models.to_hf_config(zoo_models.get("qwen2-tiny"))
    del hf["layer_types"]
    hf.update(use_sliding_window=True, sliding_window=6, max_window_layers=1)
    config = zoo_models.from_hf_config(hf)
    # Layers from max_window_layers on use the window.
    assert [config.layer_window(i) for i in range(config.n_layers)] == [None, 6]
    hf["use_sliding_window"] = False
    assert zoo_models.from_hf_config(hf).sliding_window is None


@pytest.mark.parametrize("generation_file", [True, False])
def test_generation_settings_are_what_transformers_stops_at(tmp_path, generation_file) -> None:
    # eos_token_id may be a list (instruction-tuned checkpoints stop at an end-of-turn token):
    # read as transformers reads it (generation_config.json, else config.json), and an export
    # written with the settings stops at every one of them.
    import numpy as np

    rng = np.random.default_rng()
    stops = [int(i) for i in rng.choice(np.arange(3, 64), 2, replace=False)]
    config = zoo_models.get("llama-tiny").replace(vocab_size=64, eos_token_id=stops[0])
    zoo_models.save_hf(zoo_models.build(config, key=jax.random.key(0)), tmp_path / "src")
    hf = (
        (tmp_path / "src" / "config.json")
        .read_text()
        .replace(f'"eos_token_id": {stops[0]}', f'"eos_token_id": {stops}')
    )
    (tmp_path / "src" / "config.json").write_text(hf)
    generation = tmp_path / "src" / "generation_config.json"
    if generation_file:
        generation.write_text(f'{{"eos_token_id": {stops}, "temperature": 0.3}}')
    else:
        generation.unlink()
    if generation_file:
        theirs = transformers.GenerationConfig.from_pretrained(tmp_path / "src")
    else:
        theirs = transformers.GenerationConfig.from_model_config(
            transformers.AutoConfig.from_pretrained(tmp_path / "src")
        )
    settings = zoo_models.read_generation_config(tmp_path / "src")
    assert settings["eos_token_id"] == theirs.eos_token_id == stops
    assert zoo_models.stop_token_ids(settings) == tuple(stops)
    model = zoo_models.load_hf(tmp_path / "src")
    zoo_models.save_hf(model, tmp_path / "out", generation=settings)
    again = transformers.GenerationConfig.from_pretrained(tmp_path / "out")
    assert again.eos_token_id == stops
    assert again.temperature == (0.3 if generation_file else theirs.temperature)
    # config.json keeps the whole list too, not only its first id.
    assert transformers.AutoConfig.from_pretrained(tmp_path / "out").eos_token_id == stops
