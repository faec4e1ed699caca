"""Qwen3, Gemma 3, OLMo 2, Mixtral, Qwen3-MoE, gpt-oss, DeepSeek-V3 and Qwen3.5 (dense and MoE)
checkpoints built with transformers, end to end:
LoRA fine-tuning with each family's default targets, the adapter in peft, the merged export in
transformers, greedy generation with the checkpoint's stop tokens, and Qwen3's chat template with
thinking blocks rendered as transformers renders it."""

from __future__ import annotations

import json

import equinox as eqx
import numpy as np
import pytest
import torch
import transformers

import zoo_models
from zoo_data._chat import render_chat, trained_spans
from zoo_train.cli import main
from zoo_train.peft import ADAPTER_CONFIG
from zoo_train.testing import TINY_HF_SHAPE, TINY_QWEN3_5_SHAPE, tiny_tokenizer

# Qwen3's thinking blocks, as its template renders them: the reasoning of an assistant turn
# after the last user message is shown in <think>...</think> (an empty block when there is
# none, for the final turn); earlier turns keep their answer only. The generation prompt
# opens an empty block when enable_thinking is false.
THINKING_TEMPLATE = (
    "{%- if messages[0].role == 'system' %}"
    "{{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' }}{%- endif %}"
    "{%- set ns = namespace(searching=true, last_user=messages|length - 1) %}"
    "{%- for m in messages[::-1] %}"
    "{%- if ns.searching and m.role == 'user' %}{%- set ns.searching = false %}"
    "{%- set ns.last_user = (messages|length - 1) - loop.index0 %}{%- endif %}"
    "{%- endfor %}"
    "{%- for m in messages %}"
    "{%- set content = m.content if m.content is string else '' %}"
    "{%- if m.role == 'assistant' %}"
    "{%- set thought = '' %}"
    "{%- if '</think>' in content %}"
    "{%- set thought = content.split('</think>')[0].rstrip('\\n').split('<think>')[-1]"
    ".lstrip('\\n') %}"
    "{%- set content = content.split('</think>')[-1].lstrip('\\n') %}"
    "{%- endif %}"
    "{{- '<|im_start|>assistant\\n' }}"
    "{%- if loop.index0 > ns.last_user and (loop.last or thought) %}"
    "{{- '<think>\\n' + thought.strip('\\n') + '\\n</think>\\n\\n' + content.lstrip('\\n') }}"
    "{%- else %}{{- content }}{%- endif %}"
    "{{- '<|im_end|>\\n' }}"
    "{%- elif m.role == 'user' or not loop.first %}"
    "{{- '<|im_start|>' + m.role + '\\n' + content + '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}"
    "{%- if enable_thinking is defined and enable_thinking is false %}"
    "{{- '<think>\\n\\n</think>\\n\\n' }}{%- endif %}{%- endif %}"
)

_SHAPE = {**TINY_HF_SHAPE, "bos_token_id": 1, "pad_token_id": 0}
QWEN3_5 = {**TINY_QWEN3_5_SHAPE, "bos_token_id": 1, "pad_token_id": 0}
# The tiny tokenizer's ids: </s> = 2, <|im_end|> = 4 (the end of a chat turn).
CONFIGS = {
    # Instruction-tuned Qwen3 ends turns with <|im_end|> (config.json) and stops at either.
    "qwen3": lambda: transformers.Qwen3Config(
        **_SHAPE, head_dim=16, tie_word_embeddings=True, eos_token_id=4
    ),
    # 3 layers repeating local, global: a tail; EOS and end-of-turn both in config.json.
    "gemma3_text": lambda: transformers.Gemma3TextConfig(
        **{**_SHAPE, "num_hidden_layers": 3},
        head_dim=16,
        sliding_window=4,
        sliding_window_pattern=2,
        query_pre_attn_scalar=16,
        eos_token_id=[2, 4],
    ),
    "olmo2": lambda: transformers.Olmo2Config(**_SHAPE, eos_token_id=2),
    # Mixtures of experts, the load-balancing loss on: 4 experts, top 2 in every layer; and
    # Qwen3-MoE's dense MLP on the first of its 2 layers.
    "mixtral": lambda: transformers.MixtralConfig(
        **_SHAPE,
        num_local_experts=4,
        num_experts_per_tok=2,
        output_router_logits=True,
        router_aux_loss_coef=0.02,
        eos_token_id=2,
    ),
    "qwen3_moe": lambda: transformers.Qwen3MoeConfig(
        **_SHAPE,
        head_dim=16,
        num_experts=4,
        num_experts_per_tok=2,
        moe_intermediate_size=32,
        decoder_sparse_step=2,
        eos_token_id=4,
    ),
    # Three gated DeltaNet layers and one gated attention layer; and the same with a mixture
    # of 4 experts and a gated shared expert on every layer.
    "qwen3_5_text": lambda: transformers.Qwen3_5TextConfig(**QWEN3_5, eos_token_id=4),
    "qwen3_5_moe_text": lambda: transformers.Qwen3_5MoeTextConfig(
        **QWEN3_5,
        num_experts=4,
        num_experts_per_tok=2,
        moe_intermediate_size=32,
        shared_expert_intermediate_size=48,
        eos_token_id=4,
    ),
    # Sinks, a sliding and a full layer, 4 experts top 2 with biases and the clamped SwiGLU.
    "gpt_oss": lambda: transformers.GptOssConfig(
        **_SHAPE,
        head_dim=16,
        num_local_experts=4,
        num_experts_per_tok=2,
        sliding_window=4,
        layer_types=["sliding_attention", "full_attention"],
        eos_token_id=2,
    ),
    # Latent attention with a query bottleneck, a dense layer then 4 experts in 2 groups and a
    # shared one.
    "deepseek_v3": lambda: transformers.DeepseekV3Config(
        **{**_SHAPE, "num_key_value_heads": 4},
        moe_intermediate_size=16,
        n_shared_experts=1,
        n_routed_experts=4,
        num_experts_per_tok=2,
        n_group=2,
        topk_group=1,
        first_k_dense_replace=1,
        kv_lora_rank=16,
        q_lora_rank=24,
        qk_rope_head_dim=8,
        qk_nope_head_dim=16,
        v_head_dim=12,
        eos_token_id=2,
    ),
}
STOPS = {
    "qwen3": [4, 2],
    "gemma3_text": [2, 4],
    "olmo2": [2],
    "mixtral": [2],
    "qwen3_moe": [4],
    "gpt_oss": [2],
    "deepseek_v3": [2],
    "qwen3_5_text": [4],
    "qwen3_5_moe_text": [4],
}
# A Qwen3.5's recurrences amplify float32 rounding from noise much above 0.05 (zoo-models'
# tests/_hf_tiny.py); the other families take 0.3.
NOISE = {"qwen3_5_text": 0.05, "qwen3_5_moe_text": 0.05}
# Each family's default LoRA targets, as PEFT names them: the attention projections, and
# Qwen3.5's DeltaNet's or DeepSeek-V3's latent attention's where they have them.
ATTENTION_TARGETS = ["k_proj", "o_proj", "q_proj", "v_proj"]
DELTANET_TARGETS = sorted([*ATTENTION_TARGETS, "in_proj_qkv", "in_proj_z", "out_proj"])
TARGETS = {
    "deepseek_v3": ["kv_a_proj_with_mqa", "kv_b_proj", "o_proj", "q_a_proj", "q_b_proj"],
    "qwen3_5_text": DELTANET_TARGETS,
    "qwen3_5_moe_text": DELTANET_TARGETS,
}
CHAT = [
    {
        "messages": [
            {"role": "user", "content": f"alpha {i}?"},
            {"role": "assistant", "content": f"<think>\nbeta {i}\n</think>\n\nreturn self {i}"},
        ]
    }
    for i in range(12)
]
PROMPT = "def alpha return"


def _checkpoint(family: str, directory) -> None:
    """A random checkpoint with every weight perturbed, the tiny tokenizer (with the thinking
    template) and the checkpoint's stop tokens in generation_config.json."""
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(CONFIGS[family](), dtype=torch.float32)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(NOISE.get(family, 0.3) * torch.randn_like(p))
    model.generation_config.eos_token_id = STOPS[family]
    model.save_pretrained(directory)
    tiny_tokenizer(directory)
    config = json.loads((directory / "tokenizer_config.json").read_text())
    config["chat_template"] = THINKING_TEMPLATE
    (directory / "tokenizer_config.json").write_text(json.dumps(config))


# Families whose path here a kept family runs: the adapters on the attention projections, then
# merged, exported and generated from, as for another family of the same layout.
REPEATS = {
    # dense attention with Qwen3's projections and norms: qwen3
    "olmo2": "qwen3",
    # experts through the same LoRA, peft and export path, their dense first layer through
    # zoo-models' load and save tests: mixtral
    "qwen3_moe": "mixtral",
    # the DeltaNet layers' targets: qwen3_5_text; its experts and shared expert: deepseek_v3's
    # shared expert and mixtral's experts (and zoo-models' Qwen3.5 MoE parity tests)
    "qwen3_5_moe_text": "qwen3_5_text",
}


@pytest.fixture(
    scope="module",
    params=[pytest.param(f, marks=pytest.mark.full) if f in REPEATS else f for f in CONFIGS],
)
def finetuned(request, tmp_path_factory):
    """LoRA with the family's default targets (no --lora-targets), exported merged."""
    family = request.param
    root = tmp_path_factory.mktemp(family)
    _checkpoint(family, root / "hf")
    (root / "chat.jsonl").write_text("".join(json.dumps(c) + "\n" for c in CHAT))
    code = main([
        "finetune", "--from-hf", str(root / "hf"), "--data", str(root / "chat.jsonl"),
        "--out", str(root / "run"), "--steps", "3", "--lr", "3e-2", "--batch-size", "2",
        "--seq-len", "32", "--eval-every", "0", "--no-progress", "--lora-rank", "2",
        "--set", "val_fraction=0", "--export-hf", str(root / "export"),
    ])  # fmt: skip
    assert code == 0
    return family, root


def _hf(directory) -> transformers.PreTrainedModel:
    return transformers.AutoModelForCausalLM.from_pretrained(
        directory, dtype=torch.float32, attn_implementation="eager"
    ).eval()


def _logits(model, ids: np.ndarray) -> np.ndarray:
    if isinstance(model, torch.nn.Module):
        with torch.no_grad():
            return model(torch.as_tensor(ids)).logits.numpy()
    return np.asarray(eqx.filter_jit(lambda m, x: m(x))(model, ids))


def test_lora_adapter_loads_in_peft_and_the_export_in_transformers(finetuned):
    from peft import PeftModel

    from zoo_train._run_directory import load_run

    family, root = finetuned
    meta = json.loads((root / "run" / "adapter" / ADAPTER_CONFIG).read_text())
    assert meta["target_modules"] == TARGETS.get(family, ATTENTION_TARGETS)
    ids = np.random.default_rng(0).integers(0, 256, (2, 12))
    ours = _logits(load_run(root / "run").model, ids)
    base = _hf(root / "hf")
    assert np.abs(ours - _logits(base, ids)).max() > 1e-3  # the adapters changed the model
    adapted = PeftModel.from_pretrained(base, root / "run" / "adapter").eval()
    # The experts' outputs are summed in another order than transformers' index_add.
    tol = (
        5e-5
        if family in ("mixtral", "qwen3_moe", "gpt_oss", "deepseek_v3", "qwen3_5_moe_text")
        else 2e-5
    )
    np.testing.assert_allclose(_logits(adapted, ids), ours, rtol=0, atol=tol)
    np.testing.assert_allclose(_logits(adapted.merge_and_unload(), ids), ours, rtol=0, atol=tol)
    exported = _hf(root / "export")
    assert exported.config.model_type == family
    np.testing.assert_allclose(_logits(exported, ids), ours, rtol=0, atol=1e-4)
    # The checkpoint's stop tokens survive the export: config.json's list and the generation's.
    source = json.loads((root / "hf" / "config.json").read_text())
    assert exported.config.eos_token_id == source["eos_token_id"]
    assert exported.generation_config.eos_token_id == STOPS[family]


def test_generate_stops_where_transformers_stops(finetuned, capsys):
    family, root = finetuned
    # The class tokenizer_config.json names: AutoTokenizer swaps in Qwen3_5Tokenizer for a
    # qwen3_5_moe_text checkpoint, which rebuilds the tiny tokenizer with Qwen's own splitting.
    tok = transformers.PreTrainedTokenizerFast.from_pretrained(root / "export")
    ids = tok(PROMPT, return_tensors="pt")
    with torch.no_grad():
        out = _hf(root / "export").generate(**ids, do_sample=False, max_new_tokens=8)
    new = out[0, ids["input_ids"].shape[1] :].tolist()
    ends = [i for i, t in enumerate(new) if t in STOPS[family]]
    want = new[: ends[0]] if ends else new
    capsys.readouterr()
    args = ["generate", str(root / "export"), "--prompt", PROMPT, "--greedy"]
    assert main([*args, "--max-new-tokens", "8"]) == 0
    assert capsys.readouterr().out == PROMPT + tok.decode(want, skip_special_tokens=True) + "\n"
    evaluated = ("qwen3", "mixtral", "deepseek_v3", "qwen3_5_text")
    if family in evaluated:  # the run is evaluated and converted as any other
        assert main(["eval", str(root / "run"), "--data", str(root / "chat.jsonl")]) == 0
        assert main(["convert", str(root / "run"), str(root / "converted")]) == 0
        assert _hf(root / "converted").config.model_type == family


def test_thinking_template_renders_as_transformers_renders_it(tmp_path):
    tiny_tokenizer(tmp_path)
    config = json.loads((tmp_path / "tokenizer_config.json").read_text())
    config["chat_template"] = THINKING_TEMPLATE
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(config))
    reference = transformers.AutoTokenizer.from_pretrained(tmp_path)
    tok = zoo_models.load_tokenizer(tmp_path)
    system = {"role": "system", "content": "be brief"}
    conversations = [
        [CHAT[1]["messages"][0]],
        CHAT[1]["messages"],
        [system, *CHAT[1]["messages"], {"role": "user", "content": "and?"}],
        [system, *CHAT[1]["messages"], *CHAT[2]["messages"]],
    ]
    for messages in conversations:
        turns = [(m["role"], m["content"]) for m in messages]
        for prompt in (False, True):
            want = reference.apply_chat_template(
                messages, tokenize=False, add_generation_prompt=prompt
            )
            assert render_chat(turns, tok, add_generation_prompt=prompt) == want
    # A single-turn example trains on the reply with its thinking block.
    turns = tuple((m["role"], m["content"]) for m in CHAT[3]["messages"])
    text, ((start, end),), *_ = trained_spans(turns, tok)
    assert text[start:end] == "<think>\nbeta 3\n</think>\n\nreturn self 3<|im_end|>\n"


REWARD = (
    "def longer(prompts, completions, **columns):\n    return [len(c) / 10 for c in completions]\n"
)


@pytest.fixture(
    params=[
        # gpt-oss's DPO and GRPO run the same recipes; its cache's decode: test_generate_stops
        pytest.param("gpt_oss", marks=pytest.mark.full),
        "deepseek_v3",
    ]
)
def hf_2026(request, tmp_path):
    _checkpoint(request.param, tmp_path / "hf")
    return tmp_path


def test_dpo_and_grpo_train_the_2026_families(hf_2026, tmp_path):
    """DPO as a full fine-tune (every weight; starting at ln 2, the policy its own reference),
    exported to a checkpoint transformers loads with the run's logits, and GRPO with LoRA, whose
    rollouts decode with the KV cache (DeepSeek-V3's holds latents), on gpt-oss and DeepSeek-V3."""
    import math

    from zoo_train._run_directory import load_run
    from zoo_train.loop import read_metrics

    root = hf_2026
    pairs = [{"prompt": f"alpha {i}", "chosen": " beta", "rejected": " gamma"} for i in range(8)]
    (tmp_path / "pairs.jsonl").write_text("".join(json.dumps(p) + "\n" for p in pairs))
    common = ["--from-hf", str(root / "hf"), "--steps", "2", "--batch-size", "4",
              "--seq-len", "32", "--no-progress", "--log-every", "1", "--eval-every", "0",
              "--set", "val_fraction=0"]  # fmt: skip
    dpo = ["finetune", *common, "--data", str(tmp_path / "pairs.jsonl"), "--objective", "dpo",
           "--lora-rank", "0", "--lr", "1e-2", "--out", str(tmp_path / "dpo"),
           "--export-hf", str(tmp_path / "dpo-export")]  # fmt: skip
    assert main(dpo) == 0
    first = next(r for r in read_metrics(tmp_path / "dpo" / "metrics.jsonl") if "loss" in r)
    assert first["loss"] == pytest.approx(math.log(2), rel=1e-5)
    ids = np.random.default_rng(0).integers(0, 256, (2, 12))
    ours = _logits(load_run(tmp_path / "dpo").model, ids)
    assert np.abs(ours - _logits(_hf(root / "hf"), ids)).max() > 1e-3  # every weight trained
    np.testing.assert_allclose(_logits(_hf(tmp_path / "dpo-export"), ids), ours, rtol=0, atol=1e-4)
    prompts = [{"prompt": f"alpha beta {i}"} for i in range(4)]
    (tmp_path / "prompts.jsonl").write_text("".join(json.dumps(p) + "\n" for p in prompts))
    (tmp_path / "rewards.py").write_text(REWARD)
    grpo = ["finetune", *common, "--lora-rank", "2", "--data", str(tmp_path / "prompts.jsonl"),
            "--objective", "grpo", "--reward", f"{tmp_path / 'rewards.py'}:longer",
            "--num-generations", "4", "--max-completion-length", "6", "--max-prompt-length", "16",
            "--out", str(tmp_path / "grpo")]  # fmt: skip
    assert main(grpo) == 0
    steps = [r for r in read_metrics(tmp_path / "grpo" / "metrics.jsonl") if "reward" in r]
    assert [r["step"] for r in steps] == [1, 2] and all(math.isfinite(r["loss"]) for r in steps)
