"""The hostile pass over GRPO's reward functions, through `zoo finetune --objective grpo` on a
tiny Hugging Face Llama: a function that changes its arguments, forks a daemon, exits, never
returns, overflows its weights or does not import, and prompts with a column named as a
reward's argument. Each run exits 0 only when nothing went wrong, else 2 with one sentence; it
keeps every earlier checkpoint as it was and leaves no process behind; SIGTERM while a reward
runs saves the last step and exits 143; a resume with other rewards says so."""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from cli_helpers import grpo_place, zoo_in_process

from zoo_train.grpo import RewardError, Rewards, read_prompts
from zoo_train.testing import WORDS

REWARDS = '''
import os, pathlib, signal, sys, time

HERE = pathlib.Path(__file__).parent
calls = 0

def clears(prompts, completions, **columns):
    """Scores, then empties every argument it was given."""
    scores = [float(len(c)) for c in completions]
    completions.clear()
    prompts.clear()
    for column in columns.values():
        column.clear()
    return scores

def _linger(name):
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    (HERE / f"{name}.tmp").write_text(str(os.getpid()))
    os.replace(HERE / f"{name}.tmp", HERE / name)
    while True:
        time.sleep(1)

def daemonizes(prompts, completions, **columns):
    """Forks a child that forks a grandchild ignoring SIGTERM and exits (the grandchild an
    orphan, as a daemon makes itself), and returns."""
    child = os.fork()
    if child == 0:
        if os.fork() == 0:
            _linger("daemon.pid")
        os._exit(0)
    os.waitpid(child, 0)
    while not (HERE / "daemon.pid").exists():
        time.sleep(0.01)
    return [0.5] * len(completions)

def exits(prompts, completions, **columns):
    sys.exit(0)

def one(prompts, completions, **columns):
    return [1.0] * len(completions)

def thousand(prompts, completions, **columns):
    return [1000.0] * len(completions)

def sleeps(prompts, completions, **columns):
    (HERE / "sleeper.pid").write_text(str(os.getpid()))
    time.sleep(3600)

def sleeps_on_call_2(prompts, completions, **columns):
    global calls
    calls += 1
    if calls == 2:
        sleeps(prompts, completions)
    return [1.0] * len(completions)
'''


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    rng = np.random.default_rng()
    lines = [{"prompt": " ".join(rng.choice(WORDS, 3)), "answer": str(i)} for i in range(4)]
    return grpo_place(tmp_path_factory.mktemp("grpo-hostile"), lines, REWARDS)


def _args(setup: pathlib.Path, out: str, *extra: str) -> list[str]:
    return ["finetune", "--from-hf", str(setup / "hf"), "--objective", "grpo",
            "--data", str(setup / "prompts.jsonl"), "--out", str(setup / out),
            "--num-generations", "2", "--batch-size", "4", "--max-prompt-length", "16",
            "--max-completion-length", "4", "--log-every", "1", "--save-every", "10",
            "--no-progress", *extra]  # fmt: skip


def _reward(setup: pathlib.Path, *names: str) -> list[str]:
    return ["--reward", *(f"{setup / 'rewards.py'}:{n}" for n in names)]


def _zoo(setup: pathlib.Path, out: str, *extra: str) -> tuple[int, str]:
    return zoo_in_process(_args(setup, out, *extra))


def _error(said: str) -> str:
    lines = said.strip().splitlines()
    assert "Traceback" not in said and lines and lines[-1].startswith("zoo finetune: error: ")
    assert lines[-1].endswith("."), lines[-1]
    return lines[-1]


def _alive(pid_file: pathlib.Path) -> bool:
    """Whether the process whose pid ``pid_file`` holds still runs (a zombie does not)."""
    stat = pathlib.Path(f"/proc/{pid_file.read_text()}/stat")
    try:
        return stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _checkpoints(out: pathlib.Path) -> dict[str, bytes]:
    return {str(p.relative_to(out)): p.read_bytes()
            for p in (out / "checkpoints").rglob("*") if p.is_file()}  # fmt: skip


def _workers() -> list[int]:
    """Reward processes this process started that still run."""
    out = []
    for stat in pathlib.Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, IndexError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            command = (stat.parent / "cmdline").read_bytes()
            if fields[0] != "Z" and int(fields[1]) == os.getpid() and b"reward_process" in command:
                out.append(int(stat.parent.name))
    return out


@pytest.fixture(scope="module")
def base(setup):
    """One step of a run whose rewards empty their arguments and fork a daemon: it trains,
    and its checkpoint 1 is where the other tests resume from (each on its own copy)."""
    code, said = _zoo(setup, "base", "--steps", "1", "--sample-every", "1",
                      *_reward(setup, "clears", "daemonizes"))  # fmt: skip
    return setup / "base", code, said


def _copy(base, to: pathlib.Path) -> pathlib.Path:
    return pathlib.Path(shutil.copytree(base[0], to))


def test_rewards_get_copies_and_what_they_fork_is_ended_and_said(setup, base):
    out, code, said = base
    assert code == 0, said
    # The log of sample completions has every row, though the reward emptied its arguments.
    samples = [json.loads(line) for line in (out / "completions.jsonl").read_text().splitlines()]
    assert len(samples) == 4 and all(s["prompt"] for s in samples), samples
    assert {s["step"] for s in samples} == {1}
    assert "reward function daemonizes left 1 process running after it returned" in said
    assert not _alive(setup / "daemon.pid")  # the grandchild, reparented away from its parent
    assert not _workers()


def test_a_reward_that_exits_fails_the_run_in_one_sentence_and_a_new_reward_is_said(
    setup, base, tmp_path
):
    out = _copy(base, tmp_path / "run")
    before = _checkpoints(out)
    code, said = _zoo(setup, str(out), "--steps", "2", *_reward(setup, "exits"))
    assert code == 2, said
    error = _error(said)
    assert "Reward function exits raised SystemExit: 0 (on rows 0 to 3) at step 2" in error
    assert "last checkpoint kept" in error
    assert f"zoo: changed since checkpoint 1: grpo.reward: {setup / 'rewards.py'}:clears " in said
    assert _checkpoints(out) == before
    assert not _workers()


def test_weights_that_overflow_the_combined_reward_fail_in_one_sentence(setup, base, tmp_path):
    """`--reward-weights 1e300` trained on NaN rewards with advantages zeroed, exit 0: a weight
    past ±1e15 is refused before sampling, and a combined reward past it (a large reward times
    a large weight) at the step that makes it."""
    out = _copy(base, tmp_path / "run")
    before = _checkpoints(out)
    code, said = _zoo(
        setup, str(out), "--steps", "2", *_reward(setup, "one"), "--reward-weights", "1e300"
    )
    assert code == 2, said
    error = _error(said)
    assert "--reward-weights 1e+300: each weight must lie within ±1e+15" in error, error
    code, said = _zoo(
        setup, str(out), "--steps", "2", *_reward(setup, "thousand"), "--reward-weights", "1e13"
    )
    assert code == 2, said
    error = _error(said)
    assert "The weighted reward of row 0 is 1e+16 (--reward-weights 1e+13)" in error, error
    assert "use smaller --reward-weights" in error and "at step 2" in error
    assert _checkpoints(out) == before


def test_a_reward_that_never_returns_is_ended_after_its_timeout(setup, base, tmp_path):
    out = _copy(base, tmp_path / "run")
    before = _checkpoints(out)
    (setup / "sleeper.pid").unlink(missing_ok=True)
    started = time.monotonic()
    code, said = _zoo(
        setup, str(out), "--steps", "2", *_reward(setup, "sleeps"), "--reward-timeout", "2"
    )
    assert code == 2, said
    assert "Reward function sleeps did not return within 2 s (--reward-timeout)" in _error(said)
    assert time.monotonic() - started < 120
    assert not _alive(setup / "sleeper.pid") and not _workers()
    assert _checkpoints(out) == before


def test_sigterm_while_a_reward_runs_saves_the_last_step_and_exits_143(setup):
    """A fresh run: step 1 trains unsaved (--save-every 10), then SIGTERM comes during the
    reward of step 2, which would never return: step 1 is saved and the process exits 143."""
    (setup / "sleeper.pid").unlink(missing_ok=True)
    code = "import sys; from zoo_train.cli import main; sys.exit(main())"
    args = _args(setup, "preempted", "--steps", "3", *_reward(setup, "sleeps_on_call_2"))
    victim = subprocess.Popen([sys.executable, "-c", code, *args],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        deadline = time.monotonic() + 300
        while not (setup / "sleeper.pid").exists() and victim.poll() is None:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        victim.send_signal(signal.SIGTERM)
        stderr = victim.communicate(timeout=60)[1]
    finally:  # a run that does not stop is ended, not left behind
        if victim.poll() is None:
            victim.kill()
            victim.communicate()
    assert victim.returncode == 143, stderr[-2000:]
    assert "Stopped by SIGTERM after step 1; checkpoint 1 saved" in stderr, stderr[-2000:]
    assert "Traceback" not in stderr
    assert sorted(p.name for p in (setup / "preempted" / "checkpoints").iterdir()
                  if p.name.isdigit()) == ["1"]  # fmt: skip
    assert not _alive(setup / "sleeper.pid") and not _workers()


@pytest.mark.parametrize(
    ("source", "said"),
    [
        ("def f(prompts, completions:\n", "raised SyntaxError"),
        ("import zoo_no_such_module\n", "raised ModuleNotFoundError: No module named"),
        ("raise SystemExit(3)\n", "raised SystemExit: 3"),
        ("raise KeyboardInterrupt\n", "raised KeyboardInterrupt"),
        ("x = 1\n", "has no function f"),
    ],
)
def test_a_reward_file_that_does_not_import_is_one_sentence(tmp_path, source, said):
    (tmp_path / "bad.py").write_text(source)
    with pytest.raises(ValueError, match=r"--reward '.*bad\.py:f': ") as refused:
        Rewards.load([f"{tmp_path / 'bad.py'}:f"])
    assert said in str(refused.value)
    assert not _workers()


def test_a_reward_that_raises_a_base_exception_is_a_failed_reward(tmp_path):
    (tmp_path / "base.py").write_text(
        "def interrupts(prompts, completions, **kw):\n    raise KeyboardInterrupt('no')\n"
        "def dies(prompts, completions, **kw):\n    import os; os._exit(7)\n"
    )
    for name, said in (("interrupts", "raised KeyboardInterrupt: no"),
                       ("dies", "ended its process (exit code 7) without returning")):  # fmt: skip
        rewards = Rewards.load([f"{tmp_path / 'base.py'}:{name}"])
        with pytest.raises(RewardError, match=re.escape(f"Reward function {name} {said}")):
            rewards.score(["p"] * 2, ["a", "b"], {})
        rewards.close()
    assert not _workers()


def test_a_broken_reward_file_fails_the_command_in_one_sentence(setup, tmp_path):
    (tmp_path / "broken.py").write_text("def f(:\n")
    code, said = _zoo(setup, str(tmp_path / "run"), "--steps", "1",
                      "--reward", f"{tmp_path / 'broken.py'}:f")  # fmt: skip
    assert code == 2 and "importing" in _error(said) and "raised SyntaxError" in _error(said)
    assert not (tmp_path / "run").exists()


def test_a_prompts_column_named_as_a_reward_argument_is_refused_as_it_is_read(setup, tmp_path):
    from zoo_data import byte_tokenizer

    for column in ("completions", "prompts"):
        data = tmp_path / f"{column}.jsonl"
        data.write_text(json.dumps({"prompt": "alpha beta", column: "x"}) + "\n")
        with pytest.raises(ValueError, match=rf"{column}.jsonl:1 has a column named `{column}`"):
            read_prompts([data], byte_tokenizer(), max_prompt_length=16)
    args = _args(setup, "reserved", "--steps", "1", *_reward(setup, "one"))
    args[args.index("--data") + 1] = str(tmp_path / "completions.jsonl")
    code, said = zoo_in_process(args)
    assert code == 2 and "has a column named `completions`" in _error(said)
    assert not (setup / "reserved").exists()
