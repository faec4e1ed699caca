"""A tiny Qwen3.5 checkpoint (three gated DeltaNet layers to one gated attention layer) through
the objectives whose generation or reference differ from plain fine-tuning: DPO with LoRA (the
reference is the base with the adapters off) and GRPO with LoRA (completions sampled with the
DeltaNet layers' recurrent states instead of a KV cache)."""

from __future__ import annotations

import contextlib
import io
import json
import math

import numpy as np
import pytest
import torch
import transformers

from zoo_train.cli import main
from zoo_train.loop import read_metrics
from zoo_train.testing import TINY_QWEN3_5_SHAPE, WORDS, tiny_tokenizer

REWARDS = '''
def length_share(prompts, completions, **columns):
    """Longer completions score higher: rewards that differ within a group."""
    return [min(len(text), 40) / 40 for text in completions]
'''


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    root = tmp_path_factory.mktemp("qwen3_5")
    config = transformers.Qwen3_5TextConfig(
        **TINY_QWEN3_5_SHAPE,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
    )
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))  # more makes its recurrences chaotic
    model.save_pretrained(root / "hf")
    tiny_tokenizer(root / "hf")
    rng = np.random.default_rng(3)
    pairs = [
        {
            "prompt": " ".join(rng.choice(WORDS, 3)),
            "chosen": " alpha" * int(rng.integers(1, 4)),
            "rejected": " " + " ".join(rng.choice(WORDS[5:], 2)),
        }
        for _ in range(16)
    ]
    (root / "pairs.jsonl").write_text("".join(json.dumps(p) + "\n" for p in pairs))
    prompts = [{"prompt": " ".join(rng.choice(WORDS, 3))} for _ in range(6)]
    (root / "prompts.jsonl").write_text("".join(json.dumps(p) + "\n" for p in prompts))
    (root / "rewards.py").write_text(REWARDS)
    return root


def _zoo(*args: str) -> tuple[int, str]:
    said = io.StringIO()
    with contextlib.redirect_stderr(said):
        code = main(list(args))
    return code, said.getvalue()


COMMON = ("--lora-rank", "4", "--log-every", "1", "--no-progress", "--lr", "2e-2")


def test_lora_dpo_starts_at_ln2_with_the_adapters_off_reference(checkpoint):
    out = checkpoint / "dpo"
    code, said = _zoo(
        "finetune", "--from-hf", str(checkpoint / "hf"), "--data", str(checkpoint / "pairs.jsonl"),
        "--objective", "dpo", "--out", str(out), "--steps", "3", "--batch-size", "4",
        "--seq-len", "32", "--set", "val_fraction=0", "--eval-every", "0", *COMMON,
    )  # fmt: skip
    assert code == 0, said
    records = [r for r in read_metrics(out / "metrics.jsonl") if "loss" in r]
    assert records[0]["loss"] == pytest.approx(math.log(2), rel=1e-6)
    assert all(math.isfinite(r["loss"]) for r in records)
    start = next(r for r in read_metrics(out / "metrics.jsonl") if r.get("event") == "start")
    assert [k["kernel"] for k in start["provenance"]["linear_attention"]] == ["chunked_xla"]


def test_lora_grpo_samples_through_the_recurrent_states(checkpoint):
    out = checkpoint / "grpo"
    code, said = _zoo(
        "finetune", "--from-hf", str(checkpoint / "hf"), "--objective", "grpo",
        "--data", str(checkpoint / "prompts.jsonl"), "--out", str(out),
        "--reward", f"{checkpoint / 'rewards.py'}:length_share", "--num-generations", "4",
        "--batch-size", "8", "--max-completion-length", "8", "--max-prompt-length", "16",
        "--steps", "2", "--beta", "0.04", *COMMON,
    )  # fmt: skip
    assert code == 0, said
    steps = [r for r in read_metrics(out / "metrics.jsonl") if "reward" in r]
    assert len(steps) == 2 and all(math.isfinite(r["loss"]) for r in steps)
    assert all(r["completions/mean_length"] > 0 for r in steps)
    assert any(r["reward_std"] > 0 for r in steps)  # sampled completions differ within a group
