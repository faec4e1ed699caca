"""`zoo` refuses bad input with exit code 2 and one sentence on stderr, never a traceback."""

from __future__ import annotations

import importlib.metadata
import pathlib

import pytest
from cli_helpers import run_zoo

from zoo_train.cli import build_parser


def _assert_usage_error(proc, *needles: str) -> None:
    err = proc.stderr.strip()
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr
    assert len(err.splitlines()) == 1, err  # one sentence, one line
    assert err.endswith("."), err
    for needle in needles:
        assert needle in err, err


def test_help_lists_commands_and_flags(tmp_path: pathlib.Path):
    train = run_zoo("train", "--help", cwd=tmp_path)
    assert train.returncode == 0 and "Traceback" not in train.stderr
    for flag in (
        "--model",
        "--data",
        "--out",
        "--steps",
        "--batch-size",
        "--seq-len",
        "--save-every",
        "--lr",
        "--config",
    ):
        assert flag in train.stdout
    parser = build_parser()
    top = parser.format_help()
    for command in ("train", "finetune", "generate", "eval", "convert", "models", "kernels"):
        assert command in top
    finetune = parser.parse_known_args(["finetune"])[0]._commands["finetune"].format_help()
    for flag in (
        "--from-hf",
        "--from-run",
        "--lora-rank",
        "--lora-alpha",
        "--lora-targets",
        "--export-hf",
    ):
        assert flag in finetune


def test_bad_flag(tmp_path: pathlib.Path):
    _assert_usage_error(
        run_zoo("train", "--no-such-flag", cwd=tmp_path), "--no-such-flag", "zoo train --help"
    )
    _assert_usage_error(run_zoo("train", "--steps", "many", cwd=tmp_path), "--steps", "many")


def test_unknown_preset(tmp_path: pathlib.Path):
    _assert_usage_error(
        run_zoo("train", "--model", "llama-huge", "--out", "o", cwd=tmp_path),
        "llama-huge",
        "llama-tiny",
    )


def test_missing_and_empty_data(tmp_path: pathlib.Path):
    _assert_usage_error(
        run_zoo("train", "--data", "nowhere/", "--out", "o", cwd=tmp_path),
        "nowhere/",
        "does not exist",
    )
    _assert_usage_error(run_zoo("train", "--data", "", "--out", "o", cwd=tmp_path), "empty path")
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "blank.txt").write_text("")
    _assert_usage_error(run_zoo("train", "--data", "empty", "--out", "o", cwd=tmp_path), "empty")
    assert not (tmp_path / "o" / "checkpoints").exists()


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("run.toml", "steps = 3\nbatchsize = 4\n"),
        ("run.json", '{"optimizer": {"warmup": 3}}'),
        ("run2.toml", "[model_config]\nwidth = 3\n"),
    ],
)
def test_unknown_config_key(tmp_path: pathlib.Path, name: str, text: str):
    (tmp_path / name).write_text(text)
    proc = run_zoo("train", "--config", name, "--out", "o", cwd=tmp_path)
    _assert_usage_error(proc, "Unknown setting")


def test_unknown_set_key_and_bad_value(tmp_path: pathlib.Path):
    _assert_usage_error(
        run_zoo("train", "--set", "optimizer.lr_max=1", cwd=tmp_path), "optimizer.lr_max"
    )
    (tmp_path / "bad.toml").write_text('steps = "ten"\n')
    _assert_usage_error(
        run_zoo("train", "--config", "bad.toml", cwd=tmp_path), "`steps`", "integer"
    )


def test_attention_require_not_met(tmp_path: pathlib.Path):
    proc = run_zoo(
        "train", "--attention-require", "zoo-attention>=2,<3", "--out", "o", cwd=tmp_path
    )
    installed = importlib.metadata.version("zoo-attention")
    _assert_usage_error(proc, "zoo-attention>=2,<3", f"zoo-attention {installed} is installed")
    (tmp_path / "req.toml").write_text('[attention]\nrequire = "zoo-warp-kernel>=0.1"\n')
    proc = run_zoo("train", "--config", "req.toml", "--out", "o", cwd=tmp_path)
    _assert_usage_error(proc, "zoo-warp-kernel", "not installed")
    proc = run_zoo("train", "--attention-require", "flash tpu >= 0.1", "--out", "o", cwd=tmp_path)
    _assert_usage_error(proc, "not a version requirement")
