"""GRPO through the training loop on a tiny model: a toy task it learns in a few dozen CPU
steps, an on-policy first step whose loss is zero, a sampler compiled once, sample completions
written, and a fully fine-tuned run (its reference computed once per batch) stopped and resumed
that equals an uninterrupted one step by step."""

from __future__ import annotations

import json
import pathlib

import jax
import numpy as np

import zoo_models
from zoo_data import byte_tokenizer
from zoo_train import OptimizerConfig, TrainConfig
from zoo_train.grpo import COMPLETIONS_FILE, GRPOConfig, Prompt, Rewards, train_grpo
from zoo_train.loop import read_metrics

DIGITS = set("0123456789")
WORDS = ["abc", "hello", "x", "zoo!", "jax"]


def digit_share(prompts, completions, **columns):
    """The share of a completion's characters that are digits: a tiny random model starts
    near 10/256 and can learn to emit only digits."""
    return [sum(c in DIGITS for c in text) / max(len(text), 1) for text in completions]


def _model(seed: int):
    config = zoo_models.ModelConfig(
        family="llama", vocab_size=257, d_model=32, n_layers=1, n_heads=2, mlp_hidden=64,
        max_position=64, attention_implementation="xla",
    )  # fmt: skip
    return zoo_models.build(config, key=jax.random.key(seed))


def _config(steps: int, seed: int, **kw) -> TrainConfig:
    base = dict(
        steps=steps, batch_size=16, seed=seed, log_every=1, checkpoint_every=1000,
        progress=False, plot=False,
        optimizer=OptimizerConfig(lr=3e-2, warmup_steps=0, schedule="constant"),
    )  # fmt: skip
    base.update(kw)
    return TrainConfig(**base)


def _run(out: pathlib.Path, model, grpo: GRPOConfig, config: TrainConfig, **kw):
    tok = byte_tokenizer()
    prompts = [Prompt(tuple(tok.encode(w)), w, {"word": w}) for w in WORDS]
    rewards = Rewards(("digit_share",), (digit_share,), (1.0,))
    return train_grpo(
        model, prompts, rewards, tok, grpo=grpo, config=config, out=out, max_prompt_length=6,
        **kw,
    )  # fmt: skip


def _steps(out: pathlib.Path) -> list[dict]:
    return [r for r in read_metrics(out / "metrics.jsonl") if "reward" in r]


def test_toy_task_is_learned_first_loss_is_zero_and_sampler_compiles_once(tmp_path):
    seed = int(np.random.default_rng().integers(1 << 20))
    compiles: list[int] = []
    counting = {"on": False}

    def count(event: str, *args, **kwargs) -> None:
        if counting["on"] and "backend_compile" in event:
            compiles.append(1)

    def window(end) -> None:
        # From the second step to the one before the last (whose checkpoint compiles its own
        # copies), nothing may compile: neither the sampler nor the step.
        counting["on"] = 1 <= end.step < 24

    jax.monitoring.register_event_duration_secs_listener(count)
    grpo = GRPOConfig(num_generations=8, max_completion_length=8, loss_type="grpo", beta=0.0)
    _run(
        tmp_path, _model(seed), grpo, _config(25, seed), sample_every=10,
        hooks=[(window, 1)],
    )  # fmt: skip
    counting["on"] = False
    steps = _steps(tmp_path)
    assert len(steps) == 25
    # On-policy ratios are 1 and a group's advantages sum to zero.
    assert abs(steps[0]["loss"]) < 1e-6
    start = np.mean([r["reward"] for r in steps[:3]])
    end = np.mean([r["reward"] for r in steps[-3:]])
    assert start < 0.2 and end > start + 0.4, (start, end)
    assert len(compiles) == 0, f"{len(compiles)} compilations after the first step"
    first = steps[0]
    for name in ("reward_std", "rewards/digit_share/mean", "completions/mean_length",
                 "completions/clipped_ratio", "clip_ratio/region_mean", "entropy"):  # fmt: skip
        assert np.isfinite(first[name]), name
    assert first["completions/mean_length"] <= 8
    logged = [json.loads(line) for line in (tmp_path / COMPLETIONS_FILE).read_text().splitlines()]
    assert {r["step"] for r in logged} == {10, 20, 25}
    assert all(r["prompt"] in WORDS and set(r["rewards"]) == {"digit_share"} for r in logged)


def test_stopped_and_resumed_full_run_equals_an_uninterrupted_one(tmp_path):
    # LoRA with the adapters-off reference: test_grpo_cli.py, through the command line.
    seed = int(np.random.default_rng().integers(1 << 20))
    grpo = GRPOConfig(
        num_generations=4, max_completion_length=6, loss_type="dapo", beta=0.04,
        epsilon_high=0.28,
    )  # fmt: skip

    config = _config(6, seed, batch_size=8, checkpoint_every=3)
    # The reference: the starting weights, computed once per batch of rollouts.
    extra = {"reference": "batch", "reference_model": _model(seed)}
    _run(tmp_path / "whole", _model(seed), grpo, config, **extra)
    _run(tmp_path / "split", _model(seed), grpo, config, stop_at=3, **extra)
    _run(tmp_path / "split", _model(seed), grpo, config, **extra)
    whole, split = _steps(tmp_path / "whole"), _steps(tmp_path / "split")
    assert [r["step"] for r in split] == [r["step"] for r in whole] == list(range(1, 7))
    for a, b in zip(whole, split, strict=True):
        for name in ("loss", "reward", "kl", "grad_norm", "entropy"):
            np.testing.assert_allclose(b[name], a[name], rtol=1e-6, err_msg=f"{name} {a['step']}")
    assert any(r["kl"] > 0 for r in whole[1:])  # the policy moved away from its reference
