"""``zoo finetune --objective dpo`` with LoRA on a mesh of 8 devices: the losses and rewards of
the one-device run, the reference being the adapters switched off on every shard."""

from __future__ import annotations

import json
import math
import pathlib

import numpy as np
import pytest

import zoo_train
from zoo_train.cli import main
from zoo_train.testing import WORDS, tiny_hf_llama

STEPS = 4
KEYS = ("loss", "rewards/chosen", "rewards/rejected", "rewards/margins", "logps/chosen")


def _pairs(path: pathlib.Path, n: int, seed: int) -> pathlib.Path:
    rng = np.random.default_rng(seed)
    lines = []
    for _ in range(n):
        prompt = " ".join(rng.choice(WORDS, int(rng.integers(2, 5))))
        chosen = " " + " ".join(["alpha"] * int(rng.integers(1, 4)))
        rejected = " " + " ".join(rng.choice(WORDS[5:], int(rng.integers(1, 4))))
        lines.append(json.dumps({"prompt": prompt, "chosen": chosen, "rejected": rejected}))
    path.write_text("\n".join(lines) + "\n")
    return path


def _args(root: pathlib.Path, out: str) -> list[str]:
    return ["finetune", "--from-hf", str(root / "hf"), "--data", str(root / "pairs.jsonl"),
            "--objective", "dpo", "--beta", "0.5", "--lora-rank", "4", "--out", str(root / out),
            "--steps", str(STEPS), "--batch-size", "8", "--seq-len", "48", "--lr", "2e-2",
            "--eval-every", "0", "--log-every", "1", "--no-progress", "--seed", "4"]  # fmt: skip


def _records(run: pathlib.Path) -> dict[int, dict]:
    records = zoo_train.read_metrics(run / zoo_train.METRICS_FILE)
    return {r["step"]: r for r in records if isinstance(r.get("loss"), float)}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory, one_device_zoo) -> tuple[dict, dict]:
    root = tmp_path_factory.mktemp("dpo-mesh")
    tiny_hf_llama(root / "hf", seed=6)
    _pairs(root / "pairs.jsonl", 60, seed=8)
    assert main([*_args(root, "eight"), "--mesh", "data=2,fsdp=2,tensor=2"]) == 0
    proc = one_device_zoo(*_args(root, "one"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    return _records(root / "eight"), _records(root / "one")


def test_lora_dpo_on_a_mesh_matches_one_device(runs):
    eight, one = runs
    assert sorted(eight) == sorted(one) == list(range(1, STEPS + 1))
    # Zero-initialised adapters: the policy is its reference on every shard too.
    assert eight[1]["loss"] == pytest.approx(math.log(2), abs=1e-6)
    assert eight[1]["rewards/margins"] == pytest.approx(0.0, abs=1e-6)
    for step in eight:
        for key in KEYS:
            assert eight[step][key] == pytest.approx(one[step][key], rel=1e-4, abs=1e-5), (
                step,
                key,
            )
        assert eight[step]["pairs"] == one[step]["pairs"]
    assert eight[STEPS]["rewards/margins"] > 0  # it learns to prefer the chosen replies
