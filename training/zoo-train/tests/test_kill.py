"""kill -9 a real training process at a random moment, then again while a checkpoint is being
written, then resume: the final state is bitwise that of an uninterrupted run."""

import json
import os
import pathlib
import signal
import subprocess
import sys
import time

import numpy as np

import zoo_train

SCRIPT = pathlib.Path(__file__).with_name("kill_run.py")
STEPS = 60


def _start(out: pathlib.Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, str(SCRIPT), str(out), str(STEPS)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "ZOO_ATTENTION": "xla"},
    )


def _listing(ckpts: pathlib.Path) -> tuple[list[int], list[str]]:
    names = os.listdir(ckpts) if ckpts.is_dir() else []
    return sorted(int(n) for n in names if n.isdigit()), [n for n in names if "tmp" in n]


def _kill_at_a_random_moment(out: pathlib.Path) -> None:
    """Start a run, SIGKILL it at a random moment once it trains, and check what it left."""
    victim = _start(out)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and victim.poll() is None:
        if zoo_train.read_metrics(out / "metrics.jsonl"):  # training (or resuming) has begun
            time.sleep(float(np.random.default_rng().uniform(0, 0.5)))
            break
        time.sleep(0.01)
    victim.send_signal(signal.SIGKILL)
    victim.wait()
    assert victim.returncode == -signal.SIGKILL, victim.stderr.read()[-2000:]


def test_kill_during_save_then_resume_matches_uninterrupted(tmp_path):
    ref_out, out = tmp_path / "reference", tmp_path / "victim"
    reference = _start(ref_out)
    _kill_at_a_random_moment(out)  # first a kill anywhere: compiling, stepping or saving
    victim = _start(out)  # then one inside a save, in the resumed process
    ckpts = out / "checkpoints"
    in_flight = None
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and victim.poll() is None:
        committed, pending = _listing(ckpts)
        if len(committed) >= 2 and pending:
            victim.send_signal(signal.SIGKILL)
            in_flight = pending
            break
        time.sleep(0.001)
    victim.wait()
    assert victim.returncode == -signal.SIGKILL, victim.stderr.read()[-2000:]
    assert in_flight, "the kill did not land while a save was in flight"
    committed, _ = _listing(ckpts)
    killed_at = max(int(r["step"]) for r in zoo_train.read_metrics(out / "metrics.jsonl"))

    resumed = _start(out)
    stdout, stderr = resumed.communicate(timeout=300)
    assert resumed.returncode == 0, stderr[-2000:]
    report = json.loads(stdout.strip().splitlines()[-1])
    assert "took over the lock" in stderr  # of the killed process, with a note
    # At most the steps since the last committed checkpoint are lost.
    assert report["resumed_from"] == committed[-1] and report["skipped"] == []
    assert committed[-1] <= killed_at < committed[-1] + 2 * 3 + 1
    assert report["step"] == STEPS
    assert _listing(ckpts)[1] == []  # the torn temporary directory is gone
    steps = [
        r["step"]
        for r in zoo_train.read_metrics(out / "metrics.jsonl")
        if "loss" in r and "event" not in r
    ]
    assert steps == list(range(1, STEPS + 1))  # one record per step, none duplicated

    ref_stdout, ref_stderr = reference.communicate(timeout=300)
    assert reference.returncode == 0, ref_stderr[-2000:]
    assert json.loads(ref_stdout.strip().splitlines()[-1])["resumed_from"] is None
    with np.load(out / "final.npz") as got, np.load(ref_out / "final.npz") as want:
        assert got.files == want.files
        for name in want.files:
            np.testing.assert_array_equal(got[name], want[name])  # bitwise
