"""Presets, config validation and JSON round trips, parameter counts, and the list command."""

import json

import jax
import pytest

import zoo_models
from zoo_models._cli import main


def test_presets_are_listed_and_named():
    names = zoo_models.presets()
    for required in (
        "gpt2",
        "gpt2-medium",
        "llama-3.2-1b",
        "llama-3.1-8b",
        "llama-2-7b",
        "mistral-7b",
        "qwen2-0.5b",
        "gemma-2-2b",
        "gpt2-tiny",
        "llama-tiny",
        "mistral-tiny",
        "qwen2-tiny",
        "gemma2-tiny",
        "qwen3-0.6b",
        "qwen3-1.7b",
        "qwen3-8b",
        "gemma-3-1b",
        "gemma-3-4b",
        "olmo-2-1b",
        "olmo-2-7b",
        "qwen3-tiny",
        "gemma3-tiny",
        "olmo2-tiny",
    ):
        assert required in names
        assert isinstance(zoo_models.get(required), zoo_models.ModelConfig)
    with pytest.raises(ValueError, match=r"unknown model preset 'llama-9'.*known presets: gpt2, "):
        zoo_models.get("llama-9")


@pytest.mark.parametrize("name", zoo_models.presets())
def test_json_round_trip(name):
    config = zoo_models.get(name)
    again = zoo_models.ModelConfig.from_json(json.dumps(json.loads(config.to_json())))
    assert again == config
    assert zoo_models.ModelConfig.from_dict(config.to_dict()) == config


def test_from_dict_rejects_unknown_fields():
    data = zoo_models.get("gpt2-tiny").to_dict() | {"n_layer": 3}
    with pytest.raises(ValueError, match="unknown ModelConfig field"):
        zoo_models.ModelConfig.from_dict(data)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"n_kv_heads": 3}, "multiple of `n_kv_heads`"),
        ({"family": "bert"}, "`family` must be one of"),
        ({"activation": "swish"}, "`activation` must be one of"),
        ({"n_layers": 1}, r"at least len\(window_pattern\)"),
        ({"qk_norm": "layer"}, "`qk_norm` must be False, True"),
        ({"pre_norms": False, "post_norms": False}, "needs `pre_norms` or `post_norms`"),
        ({"eos_token_id": 1, "extra_eos_token_ids": (999,)}, "below `vocab_size`"),
        ({"extra_eos_token_ids": (3,)}, "needs an `eos_token_id` first"),
        ({"compute_dtype": "int8"}, "`compute_dtype` must be one of"),
        ({"rope_scaling": "dynamic"}, "'none', 'linear', 'llama3' or 'yarn'"),
        ({"q_lora_rank": 8}, "set `kv_lora_rank` too"),
        ({"kv_lora_rank": 8, "head_dim": 32}, "needs `head_dim`.*`rope_head_dim`"),
        ({"router_scoring": "softmax2"}, "`router_scoring` must be"),
        ({"eos_token_id": 999}, "below `vocab_size`"),
        ({"d_model": 0}, "`d_model` must be a positive int"),
        ({"mlp_chunk": -1}, "`mlp_chunk` must be a number of tokens >= 0"),
        ({"mlp_chunk": True}, "`mlp_chunk` must be a number of tokens >= 0"),
    ],
)
def test_bad_configs_are_clear_errors(changes, message):
    with pytest.raises(ValueError, match=message):
        zoo_models.get("gemma2-tiny").replace(**changes)


def _count(c: zoo_models.ModelConfig) -> int:
    """Parameter count from the architecture's definition."""
    d, h, n, k, f = c.d_model, c.dim_per_head, c.n_heads, c.kv_heads, c.mlp_hidden
    norm = 2 * d if c.norm == "layernorm" else d
    attn = d * n * h + 2 * d * k * h + n * h * d
    attn += (n * h + 2 * k * h) * c.qkv_bias + d * c.out_bias
    # q/k norms: one weight per head feature, or one per feature of the whole projection.
    attn += {False: 0, True: 2 * h, "projection": (n + k) * h}[c.qk_norm]
    attn += n * c.attention_sinks  # one sink logit per query head
    if c.kv_lora_rank is not None:
        # Latent attention: the query bottleneck (or a full query projection), the key/value
        # latent with the shared rotary key, its expansion to keys and values, the output.
        r, rope, v = c.kv_lora_rank, c.rope_head_dim, c.v_head_dim
        rq = c.q_lora_rank
        attn = d * n * h if rq is None else d * rq + rq + rq * n * h + rq * c.qkv_bias
        attn += d * (r + rope) + (r + rope) * c.qkv_bias + r + r * n * (h - rope + v)
        attn += n * v * d + d * c.out_bias
    mlp = (3 if c.mlp_gated else 2) * d * f + (f * (2 if c.mlp_gated else 1) + d) * c.mlp_bias
    attn += d * n * h * c.attention_output_gate  # the gate's half of q_proj (Qwen3.5)
    layer = attn + mlp + norm * 2 * (c.pre_norms + c.post_norms)
    total = c.n_layers * layer + norm + c.vocab_size * d
    # A gated DeltaNet instead of attention (Qwen3.5): q/k/v, z, b, a and out projections, the
    # convolution over q/k/v, dt_bias and A_log a head, the output norm over a value head.
    heads, keys, values = (
        c.linear_heads,
        c.linear_qk_heads * c.linear_key_dim,
        c.linear_heads * c.linear_value_dim,
    )
    channels = 2 * keys + values
    deltanet = d * (channels + values + 2 * heads) + channels * c.linear_conv_width
    deltanet += 2 * heads + c.linear_value_dim + values * d
    total += c.n_linear_layers * (deltanet - attn)
    # A mixture-of-experts layer: a router and E gated MLPs of width I instead of the dense MLP;
    # their biases (gpt-oss), a selection bias (sigmoid routing), shared experts (DeepSeek), or
    # a shared gated MLP with a [1, D] gate (Qwen3.5-MoE).
    i = c.expert_width
    experts = c.n_experts * (d + 3 * d * i) - mlp
    experts += c.n_experts * (c.router_bias + (2 * i + d) * c.expert_bias)
    experts += c.n_experts * (c.router_scoring == "sigmoid") + 3 * d * i * c.shared_experts
    if c.shared_expert_hidden:
        experts += 3 * d * c.shared_expert_hidden + d * c.shared_expert_gate
    total += len(c.moe_layers) * experts if c.n_experts else 0
    total += c.max_position * d if c.positional == "learned" else 0
    total += 0 if c.tie_embeddings else c.vocab_size * d
    return total


@pytest.mark.parametrize("name", zoo_models.presets())
def test_parameter_counts(name):
    assert zoo_models.num_params(zoo_models.get(name)) == _count(zoo_models.get(name))


def test_published_sizes():
    # The sizes these architectures are known by.
    assert round(zoo_models.num_params(zoo_models.get("gpt2")) / 1e6) == 124
    assert round(zoo_models.num_params(zoo_models.get("llama-2-7b")) / 1e9, 2) == 6.74
    assert round(zoo_models.num_params(zoo_models.get("llama-3.1-8b")) / 1e9, 2) == 8.03
    assert round(zoo_models.num_params(zoo_models.get("gemma-2-2b")) / 1e9, 2) == 2.61
    assert round(zoo_models.num_params(zoo_models.get("qwen3-0.6b")) / 1e9, 2) == 0.60
    assert round(zoo_models.num_params(zoo_models.get("qwen3-1.7b")) / 1e9, 2) == 1.72
    assert round(zoo_models.num_params(zoo_models.get("qwen3-8b")) / 1e9, 2) == 8.19
    assert round(zoo_models.num_params(zoo_models.get("gemma-3-1b")) / 1e9, 2) == 1.00
    assert round(zoo_models.num_params(zoo_models.get("olmo-2-1b")) / 1e9, 2) == 1.48
    assert round(zoo_models.num_params(zoo_models.get("olmo-2-7b")) / 1e9, 2) == 7.30
    assert round(zoo_models.num_params(zoo_models.get("mixtral-8x7b")) / 1e9, 1) == 46.7
    assert round(zoo_models.num_params(zoo_models.get("qwen3-30b-a3b")) / 1e9, 1) == 30.5
    # The language models of Qwen3.5-9B and Qwen3.5-35B-A3B (their vision towers left out).
    assert round(zoo_models.num_params(zoo_models.get("qwen3.5-9b")) / 1e9, 2) == 8.95
    assert round(zoo_models.num_params(zoo_models.get("qwen3.5-35b-a3b")) / 1e9, 1) == 34.7
    assert round(zoo_models.num_params(zoo_models.get("gpt-oss-20b")) / 1e9, 1) == 20.9
    assert round(zoo_models.num_params(zoo_models.get("gpt-oss-120b")) / 1e9, 1) == 116.8
    assert round(zoo_models.num_params(zoo_models.get("deepseek-v3")) / 1e9) == 671
    assert round(zoo_models.num_params(zoo_models.get("moonlight-16b-a3b")) / 1e9) == 16


def test_list_command(capsys):
    assert main([]) == 0
    out = capsys.readouterr().out
    for name in zoo_models.presets():
        assert name in out
    assert "124.44M" in out


def test_list_command_json(capsys):
    assert main(["--json", "qwen2-tiny"]) == 0
    assert zoo_models.ModelConfig.from_json(capsys.readouterr().out) == zoo_models.get("qwen2-tiny")
    assert main(["--json", "nope"]) == 2
    assert "unknown model preset 'nope'" in capsys.readouterr().err


# zoo_train's LoRA target names → the attribute of zoo_layers' Attention and MLP they adapt.
_TARGET_ATTRIBUTES = {
    "q": "q_proj", "k": "k_proj", "v": "v_proj", "o": "o_proj",
    "gate": "gate", "up": "up", "down": "down",
    "qkv": "in_proj_qkv", "z": "in_proj_z", "a": "in_proj_a", "b": "in_proj_b", "out": "out_proj",
    "q_a": "q_a_proj", "q_b": "q_b_proj", "kv_a": "kv_a_proj", "kv_b": "kv_b_proj",
}  # fmt: skip


@pytest.mark.parametrize("family", zoo_models.FAMILIES)
def test_default_lora_targets_are_modules_of_their_own(family):
    """Each family's default LoRA targets are projections stored one-to-one in its Hugging Face
    layout (what a PEFT adapter can name): GPT-2's fused q/k/v are not among them."""
    preset = next(zoo_models.get(n) for n in zoo_models.presets() if n.endswith("-tiny") and
                  zoo_models.get(n).family == family)  # fmt: skip
    targets = zoo_models.default_lora_targets(family)
    assert targets == zoo_models.default_lora_targets(preset) and targets
    one_to_one = zoo_models.hf_leaf_names(preset, transposed=True)
    for target in targets:
        attribute = _TARGET_ATTRIBUTES[target]
        assert any(k.endswith(f".{attribute}.weight") for k in one_to_one), (family, target)
    if family == "gpt2":
        assert targets == ("o", "up", "down")
    with pytest.raises(ValueError, match="unknown family 'bert'"):
        zoo_models.default_lora_targets("bert")


def test_remat_computes_the_mlp_in_chunks_unless_told_otherwise():
    base = zoo_models.get("llama-tiny")
    assert base.mlp_chunk_tokens is None  # no remat: the MLP is whole
    assert base.replace(remat=True).mlp_chunk_tokens == zoo_models.REMAT_MLP_CHUNK
    assert base.replace(remat=True, mlp_chunk=0).mlp_chunk_tokens is None
    assert base.replace(mlp_chunk=512).mlp_chunk_tokens == 512
    model = zoo_models.build(base.replace(remat=True, mlp_chunk=64), key=jax.random.key(0))
    assert model.stack.blocks[0].mlp_chunk == 64
