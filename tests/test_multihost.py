"""One run over several processes on localhost (jax.distributed, gloo collectives, fake CPU
devices): the losses of one process, one writer, resuming on another process count, a killed
process noticed within the bound, and refusals before training."""

from __future__ import annotations

import json
import os
import pathlib
import signal
import socket
import subprocess
import sys
import time

import numpy as np
import pytest

WORDS = ("def", "return", "class", "import", "alpha", "beta", "gamma", "self", "value", "(x)")
ZOO = "import sys; from zoo_train.cli import main; sys.exit(main())"
STEPS = 6
RUN = [
    "train", "--model", "llama-tiny", "--steps", str(STEPS), "--batch-size", "8",
    "--seq-len", "64", "--lr", "1e-2", "--log-every", "1", "--save-every", "2",
    "--eval-every", "0", "--sample-tokens", "0", "--no-progress",
    "--set", "optimizer.warmup_steps=2", "--set", "val_fraction=0",
]  # fmt: skip
PEER_TIMEOUT_S = 6  # ZOO_PEER_TIMEOUT_S for these runs (the default is 30)
TIMEOUT_S = 240  # no process of these tests may run longer


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env(devices: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ZOO_")}
    env["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={devices}"
    env["ZOO_PEER_TIMEOUT_S"] = str(PEER_TIMEOUT_S)
    env["ZOO_START_TIMEOUT_S"] = "60"
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _launch(
    processes: int, devices: int, args: list[str], cwd: pathlib.Path, env: dict | None = None
) -> list[subprocess.Popen]:
    """``processes`` processes of ``zoo ARGS`` with ``devices`` fake devices each."""
    extra = []
    if processes > 1:
        extra = ["--coordinator", f"127.0.0.1:{_free_port()}", "--num-processes", str(processes)]
    return [
        subprocess.Popen(
            [sys.executable, "-c", ZOO, *args, *extra]
            + (["--process-id", str(i)] if processes > 1 else []),
            cwd=cwd,
            env={**_env(devices), **(env or {})},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(processes)
    ]


def _finish(procs: list[subprocess.Popen]) -> list[tuple[int, str, str]]:
    out = []
    for proc in procs:
        try:
            stdout, stderr = proc.communicate(timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            stdout, stderr = proc.communicate()
        out.append((proc.returncode, stdout, stderr))
    return out


def _zoo(processes: int, devices: int, args: list[str], cwd: pathlib.Path) -> list[tuple]:
    return _finish(_launch(processes, devices, args, cwd))


def _records(run: pathlib.Path) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


def _losses(run: pathlib.Path) -> dict[int, tuple[float, float]]:
    """step -> (loss, gradient norm) of every train record."""
    return {r["step"]: (r["loss"], r["grad_norm"]) for r in _records(run) if "loss" in r}


def _assert_same_curve(got: dict, want: dict, steps: range) -> None:
    for s in steps:
        np.testing.assert_allclose(got[s], want[s], rtol=2e-5, err_msg=f"step {s}")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    directory = tmp_path_factory.mktemp("multihost")
    rng = np.random.default_rng(0)
    (directory / "data").mkdir()
    for i in range(10):
        lines = "\n".join(" ".join(rng.choice(WORDS, 8)) for _ in range(30))
        (directory / "data" / f"doc{i}.txt").write_text(lines + "\n")
    return directory


@pytest.fixture(scope="module")
def reference(corpus: pathlib.Path) -> dict:
    """One process with four devices: the losses every layout must give."""
    [(code, _, err)] = _zoo(1, 4, [*RUN, "--data", "data", "--out", "one"], corpus)
    assert code == 0, err[-3000:]
    return _losses(corpus / "one")


def test_two_processes_match_one_then_resume_on_four_and_on_one(corpus, reference):
    run = ["--data", "data", "--out", "many"]
    # 2 processes x 2 devices, stopped at step 2, each sequence split over the 4 devices of both
    # (context=4): the steps read their rows on every process and the keys and values are
    # gathered across processes.
    results = _zoo(2, 2, [*RUN, *run, "--mesh", "fsdp=1,context=4", "--stop-at", "2"], corpus)
    for code, _, err in results:
        assert code == 0, err[-3000:]
    assert "mesh data=1 fsdp=1 context=4 tensor=1" in results[0][2]
    _assert_same_curve(_losses(corpus / "many"), reference, range(1, 3))
    # One writer: every step once in the metrics, and only process 0 speaks (labelled).
    steps = [r["step"] for r in _records(corpus / "many") if "loss" in r]
    assert steps == [1, 2]
    (_, out0, err0), (_, out1, err1) = results
    lines0 = [line for line in (out0 + err0).splitlines() if line.strip()]
    lines1 = [line for line in (out1 + err1).splitlines() if line.strip()]
    assert lines0 and all(line.startswith("[0/2] ") for line in lines0), lines0[:5]
    assert all(line.startswith("[1/2] ") for line in lines1), lines1[:5]
    assert any("zoo: steps 0 -> 2" in line for line in lines0)
    assert not any("zoo: steps" in line or " → step " in line for line in lines1)

    # Resumed on 4 processes x 1 device (the parameters over fsdp across processes) to step 4,
    # then on 1 process x 4 devices to the end.
    four = _zoo(4, 1, [*RUN, *run, "--stop-at", "4"], corpus)
    for code, _, err in four:
        assert code == 0, err[-3000:]
    assert "mesh changed since checkpoint 2" in four[0][2]
    assert (
        "context=4 tensor=1 (4 devices in 2 processes) → data=1 fsdp=4 tensor=1 "
        "(4 devices in 4 processes)" in four[0][2]
    )
    [(code, _, err)] = _zoo(1, 4, [*RUN, *run], corpus)
    assert code == 0, err[-3000:]
    assert "(4 devices in 4 processes) → data=1 fsdp=4 tensor=1 (4 devices)" in err
    _assert_same_curve(_losses(corpus / "many"), reference, range(1, STEPS + 1))
    steps = [r["step"] for r in _records(corpus / "many") if "loss" in r]
    assert steps == list(range(1, STEPS + 1))


def _committed(run: pathlib.Path) -> list[int]:
    directory = run / "checkpoints"
    if not directory.is_dir():
        return []
    return sorted(int(p.name) for p in directory.iterdir() if p.name.isdigit())


def _wait_for_commit(run: pathlib.Path, procs: list[subprocess.Popen], least: int) -> None:
    """Until ``run`` has committed a checkpoint of step ``least`` or later (a checkpoint moved
    aside as unreadable is not one), every process alive."""
    deadline = time.monotonic() + 120
    while max(_committed(run), default=0) < least and time.monotonic() < deadline:
        assert all(p.poll() is None for p in procs), [p.communicate() for p in procs]
        time.sleep(0.2)
    assert max(_committed(run), default=0) >= least, f"no checkpoint {least} within 120 s"


def test_a_killed_process_is_noticed_a_restart_resumes_and_a_killed_coordinator_ends_it(corpus):
    args = [*RUN, "--data", "data", "--out", "killed", "--steps", "400", "--save-every", "4",
            "--log-every", "4"]  # fmt: skip
    procs = _launch(2, 2, args, corpus)
    _wait_for_commit(corpus / "killed", procs, 8)  # two checkpoints
    procs[1].send_signal(signal.SIGKILL)
    killed = time.monotonic()
    code, _, err = _finish(procs[:1])[0]
    noticed = time.monotonic() - killed
    procs[1].communicate()
    assert code != 0
    assert noticed < PEER_TIMEOUT_S + 10, noticed  # the bound: the timeout plus a period
    assert "process 1 has given no sign of life" in err, err[-2000:]
    assert "Traceback" not in err
    *_, before, newest = _committed(corpus / "killed")
    # Tear the newest checkpoint too: every process must agree it is unreadable, and process 0
    # alone moves it aside.
    meta = corpus / "killed" / "checkpoints" / str(newest) / "meta" / "metadata"
    record = json.loads(meta.read_text())
    record["fingerprints"][0] ^= 1
    meta.write_text(json.dumps(record))

    # The same command again: it resumes from the last good commit, moves the torn one aside
    # and saves on (the step of the torn one again, then the next).
    procs = _launch(2, 2, args, corpus)
    _wait_for_commit(corpus / "killed", procs, newest + 4)
    # Then process 0, which hosts JAX's coordination service, dies: JAX's client ends the others
    # right away; zoo turns its fatal log into the sentence (JAX's own log if it aborts first).
    procs[0].send_signal(signal.SIGKILL)
    killed = time.monotonic()
    code, _, err = _finish(procs[1:])[0]
    _, _, resumed = _finish(procs[:1])[0]
    assert code != 0 and time.monotonic() - killed < 10
    # Killed in the middle of a collective, process 0 can leave a torn message on the wire, and
    # the collectives' transport (gloo) in the others may abort on it before JAX's client sees
    # the coordinator gone: the run still ends at once, in gloo's words.
    assert (
        "the coordinator (process 0) is gone" in err
        or "Failed to send RPC to coordination service" in err
        or "gloo::EnforceNotMet" in err
    ), err[-2000:]
    assert f"resuming from step {before}" in resumed
    assert f"checkpoint {newest} in" in resumed and "checksums" in resumed
    assert len(list((corpus / "killed" / "checkpoints-unreadable").iterdir())) == 1


def test_sigterm_to_one_process_stops_every_process_at_one_saved_step(corpus):
    args = [*RUN, "--data", "data", "--out", "preempted", "--steps", "400", "--save-every", "100"]
    procs = _launch(2, 2, args, corpus)
    deadline = time.monotonic() + 120
    while (
        not (corpus / "preempted" / "metrics.jsonl").exists()
        or max((r["step"] for r in _records(corpus / "preempted") if "loss" in r), default=0) < 3
    ):
        assert all(p.poll() is None for p in procs), [p.communicate() for p in procs]
        assert time.monotonic() < deadline, "no step within 120 s"
        time.sleep(0.1)
    procs[1].send_signal(signal.SIGTERM)  # a preemption notice that reached one host only
    results = _finish(procs)
    assert [code for code, _, _ in results] == [143, 143], [err[-2000:] for *_, err in results]
    said = [line for line in results[0][2].splitlines() if "Stopped by SIGTERM" in line]
    assert len(said) == 1 and "Traceback" not in results[0][2] + results[1][2]
    step = int(said[0].split("after step ")[1].split(";")[0])
    assert f"checkpoint {step} saved" in said[0]
    assert _committed(corpus / "preempted") == [step]


def test_bad_process_settings_are_refused_before_training(corpus):
    [(code, _, err)] = _zoo(1, 1, [*RUN, "--data", "data", "--out", "bad", "--coordinator",
                                   "127.0.0.1:1", "--num-processes", "2", "--process-id", "2"],
                            corpus)  # fmt: skip
    assert code == 2 and "--process-id 2 is outside 0…1" in err, err

    start = time.monotonic()
    procs = _launch(1, 1, [*RUN, "--data", "data", "--out", "bad", "--coordinator",
                           f"127.0.0.1:{_free_port()}", "--num-processes", "2", "--process-id",
                           "1"], corpus, env={"ZOO_START_TIMEOUT_S": "5"})  # fmt: skip
    [(code, _, err)] = _finish(procs)
    assert code == 2 and "cannot reach the coordinator" in err, err
    assert time.monotonic() - start < 30

    port = _free_port()
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                ZOO,
                *RUN,
                "--data",
                "data",
                "--out",
                "bad",
                "--lr",
                lr,
                "--coordinator",
                f"127.0.0.1:{port}",
                "--num-processes",
                "2",
                "--process-id",
                str(i),
            ],
            cwd=corpus,
            env=_env(1),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i, lr in enumerate(("0.01", "0.02"))
    ]
    for code, _, err in _finish(procs):
        assert code == 2, err[-2000:]
        assert "Process 1's lr (0.02) differs from process 0's (0.01)" in err, err[-2000:]
    assert not (corpus / "bad" / "checkpoints").exists()


def test_lora_finetune_and_export_over_two_processes(corpus, reference):
    args = ["finetune", "--from-run", "one", "--data", "data", "--out", "tuned", "--steps", "2", "--log-every", "1",
            "--batch-size", "8", "--seq-len", "64", "--lora-rank", "4", "--eval-every", "0",
            "--no-progress", "--export-hf", "exported", "--set", "val_fraction=0"]  # fmt: skip
    results = _zoo(2, 2, args, corpus)
    for code, _, err in results:
        assert code == 0, err[-3000:]
    # Gathered from both processes, written once by process 0.
    assert (corpus / "tuned" / "adapter" / "adapter_model.safetensors").is_file()
    assert (corpus / "exported" / "model.safetensors").is_file()
    assert "exported the model" in results[0][2] and "exported" not in results[1][2]
    assert [r["step"] for r in _records(corpus / "tuned") if "loss" in r] == [1, 2]


def test_benchmark_tasks_on_two_processes_give_one_processs_results(tmp_path, monkeypatch):
    pytest.importorskip("lm_eval", reason="lm-eval is zoo-train's `eval` extra")
    pytest.importorskip("torch", reason="the tiny checkpoint is made with transformers")
    from zoo_train.cli import main
    from zoo_train.testing import EVAL_TASKS, tiny_hf_llama, write_eval_tasks

    tiny_hf_llama(tmp_path / "hf")
    write_eval_tasks(tmp_path / "tasks", docs=4, longest=200)
    args = ["eval", "hf", "--tasks", ",".join(EVAL_TASKS.values()), "--include-path", "tasks",
            "--batch-size", "3"]  # fmt: skip
    results = _zoo(2, 4, [*args, "--output", "many.json"], tmp_path)  # 3 rows padded to 8
    assert [code for code, _, _ in results] == [0, 0], results[0][2][-3000:]
    # The reference: one process with one device, this one (the processes above are the test).
    monkeypatch.chdir(tmp_path)
    assert main([*args, "--output", "one.json"]) == 0
    # Process 0 prints the table and writes the file; process 1 computes its rows only.
    assert EVAL_TASKS["generate_until"] in results[0][1]
    assert EVAL_TASKS["generate_until"] not in results[1][1]
    many, one = (json.loads((tmp_path / f).read_text()) for f in ("many.json", "one.json"))
    for task in EVAL_TASKS.values():
        got, want = many["results"][task], one["results"][task]
        assert got.keys() == want.keys()
        for key, value in want.items():
            if isinstance(value, float):
                assert got[key] == pytest.approx(value, rel=1e-6), (task, key)


GRPO_REWARDS = '''
import os, pathlib

def length_share(prompts, completions, **columns):
    """Longer completions score higher; each call says how many completions it scored."""
    with (pathlib.Path(__file__).parent / "scored.txt").open("a") as f:
        f.write(f"{os.getpid()} {len(completions)}\\n")
    return [min(len(text), 40) / 40 for text in completions]
'''


def test_grpo_on_two_processes_gives_one_processs_losses_and_rewards(tmp_path, monkeypatch):
    pytest.importorskip("torch", reason="the tiny checkpoint is made with transformers")
    from zoo_train.cli import main
    from zoo_train.testing import tiny_hf_llama

    tiny_hf_llama(tmp_path / "hf", seed=3)
    rng = np.random.default_rng(4)
    prompts = [{"prompt": " ".join(rng.choice(WORDS, 3))} for _ in range(8)]
    (tmp_path / "prompts.jsonl").write_text("".join(json.dumps(p) + "\n" for p in prompts))
    for name in ("one", "many"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "rewards.py").write_text(GRPO_REWARDS)
    args = ["finetune", "--from-hf", "hf", "--objective", "grpo", "--data", "prompts.jsonl",
            "--num-generations", "4", "--batch-size", "8", "--max-completion-length", "6",
            "--max-prompt-length", "8", "--lora-rank", "4", "--beta", "0.04", "--lr", "5e-2",
            "--steps", "3", "--log-every", "1", "--no-progress", "--seed", "5"]  # fmt: skip
    results = _zoo(2, 2, [*args, "--out", "many", "--reward", "many/rewards.py:length_share"],
                   tmp_path)  # fmt: skip
    for code, _, err in results:
        assert code == 0, err[-3000:]
    # The reference: one process with one device, this one.
    monkeypatch.chdir(tmp_path)
    assert main([*args, "--out", "one", "--reward", "one/rewards.py:length_share"]) == 0
    many, one = ({r["step"]: r for r in _records(tmp_path / n) if "reward" in r}
                 for n in ("many", "one"))  # fmt: skip
    assert sorted(many) == sorted(one) == [1, 2, 3]
    for step in one:
        for key in ("loss", "reward", "reward_std", "kl", "completions/mean_length"):
            assert many[step][key] == pytest.approx(one[step][key], rel=1e-4, abs=1e-6), (step, key)
    # Each process scored its own group of 4 completions each step; one process all 8.
    calls = [line.split() for line in (tmp_path / "many" / "scored.txt").read_text().splitlines()]
    assert len({pid for pid, _ in calls}) == 2 and {n for _, n in calls} == {"4"}
    assert len(calls) == 2 * 3
    alone = (tmp_path / "one" / "scored.txt").read_text().split()
    assert alone[1::2] == ["8"] * 3
