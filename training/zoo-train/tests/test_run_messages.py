"""What a run says and leaves behind, as a batch job sees it: a log file with no bar frames and
one prefix, a finished run left byte for byte as it was when asked again, `zoo metrics` on it,
the refusal of rows longer than the model's positions, and the READMEs' commands on a run."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import hashlib
import io
import os
import pathlib
import re
import shlex
import shutil
import subprocess
import sys

import numpy as np
import pytest

import zoo_train
from zoo_train.cli import main

ROOT = pathlib.Path(__file__).resolve().parents[3]
READMES = (ROOT / "README.md", ROOT / "training" / "zoo-train" / "README.md")
# A default run, smaller: the standard library's sources, byte-level llama-tiny, the default
# trackers; 300 sample tokens, more than the model's 128 positions leave after the prompt.
TRAIN = ["train", "--out", "runs/default", "--steps", "4", "--batch-size", "2", "--seq-len",
         "32", "--max-bytes", "30000", "--eval-every", "2", "--log-every", "1",
         "--sample-tokens", "300", "--set", "model_config.d_model=32",
         "--set", "model_config.mlp_hidden=64"]  # fmt: skip


def _zoo_to_file(args: list[str], cwd: pathlib.Path, log: pathlib.Path) -> int:
    """``zoo ARGS`` in a subprocess with stdout and stderr redirected to ``log``, as
    ``make train > log 2>&1`` runs it."""
    code = "import sys; from zoo_train.cli import main; sys.exit(main())"
    with log.open("wb") as f:
        return subprocess.run(
            [sys.executable, "-c", code, *args],
            cwd=cwd,
            stdout=f,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONWARNINGS": "ignore"},
            timeout=600,
        ).returncode


def _tree(directory: pathlib.Path) -> dict[str, str]:
    """Every entry under ``directory``: a file's sha256, a directory's mark."""
    return {
        str(p.relative_to(directory)): (
            hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
        )
        for p in sorted(directory.rglob("*"))
    }


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """A finished run in ``runs/default`` of a working directory, and its log file."""
    cwd = tmp_path_factory.mktemp("finished")
    log = cwd / "train.log"
    assert _zoo_to_file(TRAIN, cwd, log) == 0, log.read_text(errors="replace")[-3000:]
    return cwd, log.read_bytes()


def test_a_redirected_log_has_no_bar_frames_and_one_prefix(finished):
    _, log = finished
    assert b"\r" not in log
    text = log.decode("utf-8", errors="replace")
    status, _, sample = text.partition("--- sample (")
    lines = status.splitlines()
    assert not [line for line in lines if line.startswith(("zoo-train:", "zoo_train:"))]
    assert lines and all(line.startswith("zoo: ") for line in lines), lines
    # The bar gave way to plain lines, the last one at the last step.
    assert [line for line in lines if line.startswith("zoo: step 4/4 (100%)")]
    # The sample's header counts the tokens generated, not the 300 asked for; the default
    # stops at llama-tiny's 128 positions without a warning.
    assert "generating at most" not in status, status
    count = re.match(r"(\d+) tokens?, temperature", sample)
    assert count, text[-2000:]
    assert 0 < int(count[1]) <= 128 - len("def ")  # its positions less the prompt's bytes


def test_a_finished_run_asked_again_is_left_byte_for_byte(finished):
    cwd, _ = finished
    run = cwd / "runs" / "default"
    before = _tree(run)
    log = cwd / "again.log"
    assert _zoo_to_file(TRAIN, cwd, log) == 0
    said = log.read_text()
    assert "the run in runs/default was already complete at step 4" in said
    assert "resuming" not in said and "--- sample" not in said
    assert _tree(run) == before


def _scalars_seen_by_tensorboard(directory: pathlib.Path) -> dict[tuple[str, int], np.float32]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(directory), size_guidance={"scalars": 0})
    events.Reload()
    return {
        (tag, e.step): np.float32(e.value)
        for tag in events.Tags()["scalars"]
        for e in events.Scalars(tag)
    }


def test_metrics_prints_the_runs_summary(finished, tmp_path, capsys):
    cwd, _ = finished
    run = cwd / "runs" / "default"
    records = zoo_train.read_metrics(run / zoo_train.METRICS_FILE)
    train = [r for r in records if "loss" in r and "event" not in r]
    evals = [r for r in records if "eval_loss" in r]
    kernel = next(r["kernel"] for r in records if r.get("event") == "start")
    assert main(["metrics", str(run)]) == 0
    out = capsys.readouterr().out
    assert "step 4 of 4 (complete)" in out and f"attention {kernel}" in out
    assert f"train loss {train[0]['loss']:.4g} (step 1) -> {train[-1]['loss']:.4g} (step 4)" in out
    assert f"eval loss {evals[0]['eval_loss']:.4g} (step 0)" in out
    rates = [r["tokens_per_s"] for r in train if r.get("tokens_per_s") is not None]
    assert f"{sum(rates) / len(rates):,.0f} tokens/s on average" in out
    table = {line.split("  ")[0]: line for line in out.splitlines()}
    assert {"train loss", "eval loss", "tokens/s"} <= table.keys()


def test_metrics_to_tensorboard_finds_the_events_there_and_replaces_a_stale_set(
    finished, tmp_path, capsys
):
    cwd, _ = finished
    run = tmp_path / "old"
    shutil.copytree(cwd / "runs" / "default", run)
    live = _tree(run)
    for _ in range(2):  # the live run's own events: there already, nothing written
        assert main(["metrics", str(run), "--to", "tensorboard"]) == 0
        assert "already holds the events of" in capsys.readouterr().out
        assert _tree(run) == live
    # A stale set (a point the run never had, past its end): replaced by the run's own.
    want = _scalars_seen_by_tensorboard(run / "tensorboard")
    from tensorboardX import SummaryWriter

    with SummaryWriter(str(run / "tensorboard")) as stale:
        stale.add_scalar("train/loss", 99.0, 9)
    assert _scalars_seen_by_tensorboard(run / "tensorboard") != want
    assert main(["metrics", str(run), "--to", "tensorboard"]) == 0
    assert "held a stale or partial set of events" in capsys.readouterr().out
    assert _scalars_seen_by_tensorboard(run / "tensorboard") == want
    assert sorted(p.name for p in run.iterdir()) == sorted(
        p.name for p in (cwd / "runs" / "default").iterdir()
    )
    assert main(["metrics", str(run), "--to", "tensorboard"]) == 0
    assert "already holds the events of" in capsys.readouterr().out


def _readme_commands() -> list[str]:
    """The READMEs' ``zoo`` commands on a run of the default layout (``runs/default``,
    ``runs/old``, ``runs/a``) that name no other file, comments left off."""
    found = []
    for readme in READMES:
        text = readme.read_text()
        blocks = re.findall(r"```bash\n(.*?)```", text, re.S)
        lines = [line.split("  #")[0].strip() for b in blocks for line in b.splitlines()]
        lines += re.findall(r"`(zoo [^`]+)`", text)
        for line in lines:
            if not line.startswith("zoo ") or line.endswith("\\"):  # a continued line
                continue
            words = shlex.split(line)
            on_run = len(words) > 2 and re.fullmatch(r"runs/(default|old|a)", words[2])
            if on_run and not any("/" in w or w.endswith((".txt", ".jsonl")) for w in words[3:]):
                found.append(line)
    return sorted(set(found))


def test_readme_commands_on_a_default_run_run_as_written(finished, tmp_path, monkeypatch):
    cwd, _ = finished
    commands = _readme_commands()
    assert "zoo metrics runs/old --to tensorboard" in commands, commands
    for name in ("default", "old", "a"):
        shutil.copytree(cwd / "runs" / "default", tmp_path / "runs" / name)
    env = {**os.environ, "PYTHONWARNINGS": "ignore", "WANDB_MODE": "offline"}
    for name in ("WANDB_CONFIG_DIR", "WANDB_CACHE_DIR", "WANDB_DATA_DIR"):
        env[name] = str(tmp_path / name.lower())
    code = "import sys; from zoo_train.cli import main; sys.exit(main())"
    monkeypatch.chdir(tmp_path)
    for command in commands:
        if "wandb" not in command:  # in this process, as the other commands' tests run them
            said = io.StringIO()
            with contextlib.redirect_stderr(said):
                assert main(shlex.split(command)[1:]) == 0, (command, said.getvalue()[-2000:])
            continue
        # wandb's offline run starts a service process: in a process of its own, as written
        done = subprocess.run(
            [sys.executable, "-c", code, *shlex.split(command)[1:]],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            env=env,
            timeout=600,
        )
        assert done.returncode == 0, (command, done.stderr[-2000:])


def test_seq_len_beyond_the_models_positions_is_refused(tmp_path, capsys):
    out = tmp_path / "long"
    code = main(["train", "--model", "llama-tiny", "--seq-len", "512", "--out", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert "--seq-len 512 is longer than the model's 128 positions" in err[0]
    assert "--set model_config.max_position=512" in err[0] and "Traceback" not in err[0]
    assert not out.exists()


def test_a_run_records_the_positions_it_was_trained_at(tmp_path, capsys):
    out = tmp_path / "long"
    args = ["train", "--model", "llama-tiny", "--seq-len", "160", "--set",
            "model_config.max_position=160", "--out", str(out), "--steps", "1", "--batch-size",
            "1", "--max-bytes", "30000", "--sample-tokens", "0", "--no-progress",
            "--eval-every", "0", "--set", "model_config.d_model=32",
            "--set", "model_config.mlp_hidden=64"]  # fmt: skip
    assert main(args) == 0
    assert zoo_train.load_run(out).model.config.max_position == 160
    assert main(["convert", str(out), str(tmp_path / "hf")]) == 0
    import json

    config = json.loads((tmp_path / "hf" / "config.json").read_text())
    assert config["max_position_embeddings"] == 160


def test_sibling_writes_of_a_save_that_hit_a_full_disk_say_nothing(caplog):
    # Orbax writes one save's arrays as parallel tasks; when the disk fills, each fails with the
    # same TensorStore error, zoo reports the first, and asyncio logs the rest as "never
    # retrieved" when they are collected. Storage errors are quiet; any other error is not.
    from zoo_train.checkpoint._orbax_quiet import quiet_orbax

    quiet_orbax()
    storage = [
        f"Failed writing: x [os_error_code='{n}']" for n in sorted(zoo_train._errors.STORAGE_ERRNOS)
    ]
    storage.append('DATA_LOSS: Error reading "a00001/.zarray" in OCDBT database')  # a read
    others = ["Failed writing: x [os_error_code='2']", "a bug in a writer"]

    async def fail(message: str) -> None:
        raise ValueError(message)

    loop = asyncio.new_event_loop()
    tasks = [loop.create_task(fail(m)) for m in storage + others]
    loop.run_until_complete(asyncio.wait(tasks))
    loop.close()
    del tasks
    gc.collect()
    logged = [str(r.exc_info[1]) for r in caplog.records if "never retrieved" in r.getMessage()]
    assert sorted(logged) == sorted(others)
