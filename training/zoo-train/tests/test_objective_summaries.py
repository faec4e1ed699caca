"""Each objective's end-of-run summary and ``zoo metrics`` show what that objective is judged
by: GRPO its reward (and each function's), KL and completion length, a preference objective
its reward accuracy and margin; one record is a value, never a trend from itself to itself."""

from __future__ import annotations

import json
import pathlib

import pytest

from zoo_train.cli import main
from zoo_train.loop import METRICS_FILE
from zoo_train.recipes import _steps

GRPO_SETTINGS = {
    "objective": "grpo",
    "from_hf": "./qwen-hf",
    "steps": 60,
    "batch_size": 16,
    "grad_accum": 1,
    "seq_len": 128,
    "grpo.num_generations": 8,
    "grpo.max_prompt_length": 64,
    "grpo.max_completion_length": 32,
}


def _grpo_step(step: int, reward: float) -> dict:
    return {
        "step": step,
        "loss": 0.0,
        "tokens_per_s": 1000.0,
        "reward": reward,
        "rewards/has_a/mean": reward,
        "kl": 0.001 * step,
        "completions/mean_length": 20.0 + step / 10,
    }


def _write(run: pathlib.Path, records: list[dict]) -> None:
    run.mkdir()
    (run / METRICS_FILE).write_text("".join(json.dumps(r) + "\n" for r in records))


@pytest.fixture
def grpo_run(tmp_path: pathlib.Path) -> pathlib.Path:
    run = tmp_path / "grpo"
    start = {"event": "start", "step": 0, "settings": GRPO_SETTINGS}
    _write(run, [start, _grpo_step(5, 0.087), _grpo_step(30, 0.4), _grpo_step(60, 0.667)])
    return run


def test_grpo_summary_gives_the_reward_kl_and_completion_length_not_the_loss(grpo_run, capsys):
    _steps._summary(grpo_run, 12.0, 0, 60)
    line = capsys.readouterr().err.splitlines()[0]
    assert "reward 0.087 (step 5) -> 0.667 (step 60)" in line, line
    assert "reward has_a 0.087 (step 5) -> 0.667 (step 60)" in line, line
    assert "KL 0.005 (step 5) -> 0.060 (step 60)" in line, line
    assert "completion length 20.5 (step 5) -> 26.0 (step 60)" in line, line
    assert "train loss" not in line, line


def test_zoo_metrics_of_a_grpo_run_shows_its_reward_and_its_real_batch(grpo_run, capsys):
    assert main(["metrics", str(grpo_run)]) == 0
    out = capsys.readouterr().out
    header, trend = out.splitlines()[:2]
    assert "16 completions a step (2 prompts x 8) of up to 64 + 32 tokens" in header, header
    assert "x 128 tokens" not in header, header  # --seq-len is not what GRPO trains on
    assert trend.split(": ", 1)[-1].startswith("reward 0.087 (step 5) -> 0.667 (step 60)"), trend
    curves = [line.split("  ")[0] for line in out.splitlines()[4:]]  # after the table's rule
    assert curves[1:5] == ["reward", "reward has_a", "KL", "completion length"], out


def test_one_preference_record_is_a_value_with_its_margin(tmp_path, capsys):
    run = tmp_path / "dpo"
    settings = {"objective": "dpo", "steps": 12, "batch_size": 4, "seq_len": 64}
    record = {"step": 12, "loss": 0.25, "rewards/accuracies": 1.0, "rewards/margins": 2.5}
    _write(run, [{"event": "start", "step": 0, "settings": settings}, record])
    _steps._summary(run, 3.0, 0, 12)
    line = capsys.readouterr().err.splitlines()[0]
    assert "train loss 0.250 (steps 1-12)" in line and "->" not in line.split("; ", 1)[1], line
    assert "reward accuracy 1.000 (steps 1-12)" in line, line
    assert "reward margin 2.500 (steps 1-12)" in line, line
    assert main(["metrics", str(run)]) == 0
    trend = capsys.readouterr().out.splitlines()[1]
    assert "reward accuracy 1 (step 12)" in trend and "->" not in trend, trend
