"""kill -9 a real training process at a random moment and again while a checkpoint is being
written, or stop it with SIGINT, SIGTERM and a hang-up of its terminal, then resume: the same
final state as an uninterrupted run, bit for bit."""

import fcntl
import json
import os
import pathlib
import pty
import select
import signal
import subprocess
import sys
import termios
import time

import numpy as np
import pytest

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


def _start_on_a_terminal(out: pathlib.Path) -> tuple[subprocess.Popen, int]:
    """A run whose terminal is a pseudo-terminal (its controlling one, in a session of its
    own), and the terminal's other end: closing it is a hang-up, as when an SSH session drops."""
    master, slave = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, str(SCRIPT), str(out), str(STEPS)],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        start_new_session=True,
        preexec_fn=lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 0),
        env={**os.environ, "ZOO_ATTENTION": "xla"},
    )
    os.close(slave)
    return process, master


def _listing(ckpts: pathlib.Path) -> tuple[list[int], list[str]]:
    names = os.listdir(ckpts) if ckpts.is_dir() else []
    return sorted(int(n) for n in names if n.isdigit()), [n for n in names if "tmp" in n]


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """An uninterrupted run, started at once and waited for when first needed."""
    out = tmp_path_factory.mktemp("reference")
    process = _start(out)

    def final() -> pathlib.Path:
        if process.returncode is None:
            stdout, stderr = process.communicate(timeout=300)
            assert process.returncode == 0, stderr[-2000:]
            assert json.loads(stdout.strip().splitlines()[-1])["resumed_from"] is None
        return out / "final.npz"

    yield final
    if process.poll() is None:
        process.kill()


def _assert_same_final(out: pathlib.Path, want_file: pathlib.Path) -> None:
    with np.load(out / "final.npz") as got, np.load(want_file) as want:
        assert got.files == want.files
        for name in want.files:
            np.testing.assert_array_equal(got[name], want[name])  # bitwise


def _train_steps(out: pathlib.Path) -> list[int]:
    return [
        r["step"]
        for r in zoo_train.read_metrics(out / "metrics.jsonl")
        if "loss" in r and "event" not in r
    ]


def _wait_for(condition, process: subprocess.Popen) -> None:
    deadline = time.monotonic() + 300
    while not condition():
        assert process.poll() is None, process.stderr and process.stderr.read()[-2000:]
        assert time.monotonic() < deadline
        time.sleep(0.01)


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


def test_sigint_while_compiling_sigterm_and_a_hang_up_mid_run_save_then_resume(tmp_path, reference):
    out = tmp_path / "run"
    # Ctrl-C while the loop starts (tracing, compiling): a clean exit, before step 1 with nothing
    # to save or after it with step 1 saved; this once crashed the interpreter.
    first = _start(out)
    _wait_for(lambda: (out / "metrics.jsonl").exists(), first)
    first.send_signal(signal.SIGINT)
    stdout, stderr = first.communicate(timeout=300)
    assert first.returncode == 130, stderr[-2000:]
    assert "Traceback" not in stderr and "Fatal" not in stderr
    stopped = json.loads(stdout.strip().splitlines()[-1])
    assert stopped in ({"stopped": 0, "saved": False}, {"stopped": 1, "saved": True})
    assert _listing(out / "checkpoints")[0] == ([1] if stopped["saved"] else [])

    # SIGTERM (a preemption) between checkpoints: the step in flight is finished and saved.
    second = _start(out)
    _wait_for(lambda: max(_train_steps(out), default=0) >= 7, second)
    second.send_signal(signal.SIGTERM)
    stdout, stderr = second.communicate(timeout=300)
    assert second.returncode == 143, stderr[-2000:]
    stopped = json.loads(stdout.strip().splitlines()[-1])
    assert stopped["saved"] and stopped["stopped"] >= 7
    assert stopped["stopped"] in _listing(out / "checkpoints")[0]

    # The terminal closes (SIGHUP, and every later write to it fails): saved as for SIGTERM.
    hung, terminal = _start_on_a_terminal(out)
    before = stopped["stopped"]

    def trained_on() -> bool:
        while select.select([terminal], [], [], 0)[0]:  # keep the terminal's buffer drained
            os.read(terminal, 65536)
        return max(_train_steps(out), default=0) >= before + 3

    _wait_for(trained_on, hung)
    os.close(terminal)
    assert hung.wait(timeout=300) == 129  # 128 + SIGHUP, as a shell reports it
    hung_up_at = max(_train_steps(out))
    assert hung_up_at in _listing(out / "checkpoints")[0]  # the step it stopped after, saved
    stopped = {"stopped": hung_up_at}

    third = _start(out)
    stdout, stderr = third.communicate(timeout=300)
    assert third.returncode == 0, stderr[-2000:]
    report = json.loads(stdout.strip().splitlines()[-1])
    assert report["resumed_from"] == stopped["stopped"] and report["step"] == STEPS
    assert _train_steps(out) == list(range(1, STEPS + 1))
    _assert_same_final(out, reference())


def test_kill_during_save_then_resume_matches_uninterrupted(tmp_path, reference):
    out = tmp_path / "victim"
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
    assert _train_steps(out) == list(range(1, STEPS + 1))  # one record per step, none duplicated
    _assert_same_final(out, reference())
