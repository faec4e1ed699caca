"""``zoo finetune --objective grpo`` with LoRA on a mesh of 8 devices (``data=2,fsdp=2,
tensor=2``): completions sampled on the mesh from the sharded parameters give the losses,
rewards and KL of the one-device run."""

from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest

import zoo_train
from zoo_train.cli import main
from zoo_train.testing import WORDS, tiny_hf_llama

STEPS = 3
KEYS = ("loss", "reward", "reward_std", "kl", "entropy", "completions/mean_length")
REWARDS = """
def length_share(prompts, completions, **columns):
    return [min(len(text), 40) / 40 for text in completions]
"""


def _args(root: pathlib.Path, out: str) -> list[str]:
    return ["finetune", "--from-hf", str(root / "hf"), "--data", str(root / "prompts.jsonl"),
            "--objective", "grpo", "--reward", f"{root / 'rewards.py'}:length_share",
            "--beta", "0.04", "--lora-rank", "4", "--out", str(root / out),
            "--steps", str(STEPS), "--batch-size", "8", "--num-generations", "4",
            "--max-completion-length", "8", "--max-prompt-length", "16", "--lr", "5e-2",
            "--log-every", "1", "--no-progress", "--seed", "4"]  # fmt: skip


def _records(run: pathlib.Path) -> dict[int, dict]:
    records = zoo_train.read_metrics(run / zoo_train.METRICS_FILE)
    return {r["step"]: r for r in records if isinstance(r.get("reward"), float)}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory, one_device_zoo) -> tuple[dict, dict]:
    root = tmp_path_factory.mktemp("grpo-mesh")
    tiny_hf_llama(root / "hf", seed=6)
    rng = np.random.default_rng(8)
    lines = [{"prompt": " ".join(rng.choice(WORDS, int(rng.integers(2, 5))))} for _ in range(12)]
    (root / "prompts.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    (root / "rewards.py").write_text(REWARDS)
    assert main([*_args(root, "eight"), "--mesh", "data=2,fsdp=2,tensor=2"]) == 0
    proc = one_device_zoo(*_args(root, "one"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    return _records(root / "eight"), _records(root / "one")


def test_lora_grpo_on_a_mesh_matches_one_device(runs):
    eight, one = runs
    assert sorted(eight) == sorted(one) == list(range(1, STEPS + 1))
    for step in eight:
        for key in KEYS:
            assert eight[step][key] == pytest.approx(one[step][key], rel=1e-4, abs=1e-5), (
                step,
                key,
            )
    assert eight[STEPS]["kl"] > 0  # the adapters moved the policy on every shard alike
