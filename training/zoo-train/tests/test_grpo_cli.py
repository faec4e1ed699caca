"""``zoo finetune --objective grpo`` end to end on a tiny Hugging Face Llama: a reward function
in a file, LoRA with the adapters-off reference, a run killed (SIGKILL) after a checkpoint and
resumed that equals an uninterrupted one step by step, a PEFT adapter that peft loads, a reward
function that fails stopping the run in one sentence with its last checkpoint kept, and a prompt
too long refused."""

from __future__ import annotations

import contextlib
import io
import json
import pathlib
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from cli_helpers import grpo_place, zoo_in_process

from zoo_train.cli import main
from zoo_train.loop import read_metrics
from zoo_train.testing import WORDS

REWARDS = '''
calls = 0

def length_share(prompts, completions, **columns):
    """Longer completions score higher: rewards that differ within a group."""
    return [min(len(text), 40) / 40 for text in completions]

def answer_seen(prompts, completions, answer, **columns):
    return [float(str(a) in text) for text, a in zip(completions, answer)]

def fails_at_step_3(prompts, completions, **columns):
    global calls
    calls += 1
    return [float("nan") if calls == 3 and i == 1 else 0.0 for i in range(len(completions))]
'''


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    rng = np.random.default_rng()
    lines = [
        {"prompt": " ".join(rng.choice(WORDS, int(rng.integers(2, 5)))), "answer": str(i)}
        for i in range(6)
    ]
    lines[2] = {"prompt": [{"role": "user", "content": "alpha beta"}], "answer": "7"}
    return grpo_place(tmp_path_factory.mktemp("grpo-cli"), lines, REWARDS)


def _args(setup: pathlib.Path, out: str, *extra: str) -> list[str]:
    return ["finetune", "--from-hf", str(setup / "hf"), "--objective", "grpo",
            "--data", str(setup / "prompts.jsonl"), "--out", str(setup / out),
            "--reward", f"{setup / 'rewards.py'}:length_share", f"{setup / 'rewards.py'}:answer_seen",
            "--reward-weights", "1", "0.5", "--num-generations", "4", "--batch-size", "8",
            "--max-completion-length", "8", "--max-prompt-length", "24", "--lr", "5e-2",
            "--log-every", "1", "--no-progress", *extra]  # fmt: skip


def _zoo(setup: pathlib.Path, out: str, *extra: str) -> tuple[int, str]:
    return zoo_in_process(_args(setup, out, *extra))


def _steps(out: pathlib.Path) -> list[dict]:
    return [r for r in read_metrics(out / "metrics.jsonl") if "reward" in r]


LORA = ["--lora-rank", "4", "--beta", "0.04", "--steps", "8", "--save-every", "2",
        "--sample-every", "4"]  # fmt: skip


def _saved(out: pathlib.Path) -> list[int]:
    return sorted(int(p.name) for p in (out / "checkpoints").iterdir() if p.name.isdigit())


def _start(setup: pathlib.Path, out: str) -> subprocess.Popen:
    code = "import sys; from zoo_train.cli import main; sys.exit(main())"
    return subprocess.Popen(
        [sys.executable, "-c", code, *_args(setup, out, *LORA)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def _stop_when(victim: subprocess.Popen, ready, sig: signal.Signals) -> str:
    """Send ``sig`` to ``victim`` once ``ready()``; its stderr."""
    deadline = time.monotonic() + 300
    while not ready() and victim.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    victim.send_signal(sig)
    return victim.communicate(timeout=120)[1]


def test_lora_grpo_killed_or_preempted_and_resumed_equals_an_uninterrupted_run(setup):
    """SIGKILL once checkpoint 2 is saved, then SIGTERM (a preemption) between checkpoints,
    which finishes and saves the step in flight: each resumed, the run's losses, rewards and
    KL are the uninterrupted run's, step by step; and its adapter loads in peft."""
    out = setup / "killed"
    victim = _start(setup, "killed")
    stderr = _stop_when(victim, (out / "checkpoints" / "2").is_dir, signal.SIGKILL)
    assert victim.returncode == -signal.SIGKILL, stderr[-2000:]
    killed = _steps(out)
    assert killed and killed[-1]["step"] < 8  # it died mid-run
    after = _saved(out)[-1] + 2  # a checkpoint only the resumed process writes
    victim = _start(setup, "killed")
    stderr = _stop_when(victim, (out / "checkpoints" / str(after)).is_dir, signal.SIGTERM)
    assert victim.returncode == 143, stderr[-2000:]
    assert after <= _saved(out)[-1] < 8  # the step in flight when it stopped, saved
    code, said = _zoo(setup, "killed", *LORA, "--export-hf", str(setup / "export"))
    assert code == 0, said
    code, said = _zoo(setup, "whole", *LORA)
    assert code == 0, said
    assert "reference: the base model with the LoRA adapters switched off" in said
    whole, resumed = _steps(setup / "whole"), _steps(setup / "killed")
    assert [r["step"] for r in whole] == [r["step"] for r in resumed] == list(range(1, 9))
    for a, b in zip(whole, resumed, strict=True):
        for name in ("loss", "reward", "reward_std", "kl", "rewards/length_share/mean",
                     "rewards/answer_seen/mean", "completions/mean_length"):  # fmt: skip
            np.testing.assert_allclose(b[name], a[name], rtol=1e-6, err_msg=f"{name} {a['step']}")
    assert whole[0]["kl"] == pytest.approx(0.0, abs=1e-7)  # zero-initialised adapters
    logged = (setup / "whole" / "completions.jsonl").read_text().splitlines()
    samples = [json.loads(line) for line in logged]
    assert {s["step"] for s in samples} == {4, 8}
    # The adapter loads in peft, and merged it is the export.
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    base = AutoModelForCausalLM.from_pretrained(setup / "hf", dtype=torch.float32).eval()
    export = AutoModelForCausalLM.from_pretrained(setup / "export", dtype=torch.float32).eval()
    ids = torch.as_tensor(np.random.default_rng().integers(3, 256, (2, 12)))
    with torch.no_grad():
        before, want = base(ids).logits.numpy(), export(ids).logits.numpy()
        got = PeftModel.from_pretrained(base, setup / "killed" / "adapter").eval()(ids).logits
    np.testing.assert_allclose(got.numpy(), want, atol=2e-5)
    assert not np.allclose(want, before, atol=1e-4)  # the adapters learned something


def test_a_failing_reward_stops_in_one_sentence_and_keeps_the_last_checkpoint(setup):
    code, said = _zoo(
        setup, "failing", "--steps", "4", "--save-every", "2", "--reward",
        f"{setup / 'rewards.py'}:fails_at_step_3", "--reward-weights", "1",
    )  # fmt: skip
    assert code == 2
    error = [line for line in said.splitlines() if "Reward function fails_at_step_3" in line]
    assert len(error) == 1 and "Traceback" not in said
    assert "returned nan for row 1 at step 3" in error[0] and "last checkpoint kept" in error[0]
    assert _saved(setup / "failing") == [2]


def test_a_prompt_too_long_is_refused_or_cut_and_a_full_fine_tune_exports(setup):
    code, said = _zoo(setup, "long", "--steps", "1", "--max-prompt-length", "3")
    assert code == 2
    assert "prompts.jsonl:" in said and "--long-prompts cut" in said
    # Full fine-tuning, its reference the starting weights once per batch, exported whole.
    code, said = _zoo(setup, "cut", "--steps", "3", "--max-prompt-length", "3",
                      "--long-prompts", "cut", "--beta", "0.04",
                      "--export-hf", str(setup / "full"))  # fmt: skip
    assert code == 0, said
    assert "reference: the starting weights, once per batch" in said
    steps = _steps(setup / "cut")
    # Step 1 trains at lr 0 (the warm-up's start): step 2 is still the reference; then it moves.
    assert steps[0]["kl"] == pytest.approx(0.0, abs=1e-6) and steps[-1]["kl"] > 0
    import torch
    from transformers import AutoModelForCausalLM

    base = AutoModelForCausalLM.from_pretrained(setup / "hf", dtype=torch.float32).eval()
    full = AutoModelForCausalLM.from_pretrained(setup / "full", dtype=torch.float32).eval()
    ids = torch.as_tensor(np.random.default_rng().integers(3, 256, (2, 12)))
    with torch.no_grad():
        assert not np.allclose(full(ids).logits.numpy(), base(ids).logits.numpy(), atol=1e-4)


def test_settings_grpo_cannot_use_are_refused_before_the_model_loads(setup, tmp_path):
    for extra, said in [
        (["--epochs", "1"], "counts its length in --steps"),
        (["--eval-data", str(setup / "prompts.jsonl")], "drop --eval-data"),
        (["--num-generations", "3"], "not whole groups of --num-generations 3"),
        (["--reward-weights", "1"], "1 weights for 2 reward functions"),
    ]:
        steps = [] if extra[0] == "--epochs" else ["--steps", "1"]
        code, err = _zoo(setup, "refused", *steps, *extra)
        assert code == 2 and said in err, (extra, err)
    assert not (setup / "refused").exists()
    text = tmp_path / "notes.txt"
    text.write_text("plain text\n")
    args = _args(setup, "refused")
    args[args.index("--data") + 1] = str(text)
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        assert main(args) == 2
    assert "as JSON lines files" in err.getvalue()
