"""`zoo` refuses bad input with exit code 2 and one sentence on stderr, never a traceback."""

from __future__ import annotations

import importlib.metadata
import json
import math
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest
from safetensors import safe_open
from safetensors.numpy import load_file, save_file

from zoo_train.cli import build_parser, main
from zoo_train.testing import run_zoo, write_corpus


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


def _damage_traversal(model: pathlib.Path) -> None:
    names = list(safe_open(model / "model.safetensors", "np").keys())
    (model / "model.safetensors").rename(model.parent / "elsewhere.safetensors")
    index = {"weight_map": dict.fromkeys(names, "../elsewhere.safetensors")}
    (model / "model.safetensors.index.json").write_text(json.dumps(index))


def _damage_truncated(model: pathlib.Path) -> None:
    data = (model / "model.safetensors").read_bytes()
    cut = np.random.default_rng().integers(0, len(data) // 2)
    (model / "model.safetensors").write_bytes(data[:cut])


def _damage_config_list(model: pathlib.Path) -> None:
    (model / "config.json").write_text(
        json.dumps([json.loads((model / "config.json").read_text())])
    )


def _damage_weight_map_list(model: pathlib.Path) -> None:
    (model / "model.safetensors.index.json").write_text(json.dumps({"weight_map": []}))


def _damage_nan(model: pathlib.Path) -> None:
    tensors = load_file(model / "model.safetensors")
    name = sorted(tensors)[np.random.default_rng().integers(len(tensors))]
    tensors[name].reshape(-1)[0] = np.nan
    save_file(tensors, model / "model.safetensors", metadata={"format": "pt"})


@pytest.mark.parametrize(
    "damage",
    [
        _damage_traversal,
        _damage_truncated,
        _damage_config_list,
        _damage_weight_map_list,
        _damage_nan,
    ],
)
def test_hostile_model_directories_are_one_sentence(tmp_path, capsys, damage):
    import jax

    import zoo_models

    config = zoo_models.get("llama-tiny").replace(n_layers=1, d_model=16, mlp_hidden=32)
    model = tmp_path / "model"
    zoo_models.save_hf(zoo_models.build(config, key=jax.random.key(0)), model)
    damage(model)
    write_corpus(tmp_path / "corpus", files=2, lines=5)
    commands = [
        ["eval", str(model), "--data", str(tmp_path / "corpus")],
        ["generate", str(model)],
        ["convert", str(model), str(tmp_path / "converted")],
        ["finetune", "--from-hf", str(model), "--data", str(tmp_path / "corpus"),
         "--out", str(tmp_path / "ft")],
    ]  # fmt: skip
    for command in commands:
        capsys.readouterr()
        code = main(command)
        err = capsys.readouterr().err.strip()
        assert code == 2, (command, err)
        assert "Traceback" not in err and len(err.splitlines()) == 1 and err.endswith("."), err
    assert not (tmp_path / "converted").exists()


def test_a_model_too_large_for_memory_is_refused_before_allocating(tmp_path, capsys):
    import jax

    import zoo_models

    write_corpus(tmp_path / "corpus", files=2, lines=5)
    layers = int(np.random.default_rng().integers(10**8, 2 * 10**8))
    code = main([
        "train", "--data", str(tmp_path / "corpus"), "--out", str(tmp_path / "run"),
        "--set", f"model_config.n_layers={layers}",
    ])  # fmt: skip
    err = capsys.readouterr().err.strip()
    assert code == 3 and len(err.splitlines()) == 1, err  # 3: it does not fit
    assert "parameters" in err and "GiB, more than this host's memory" in err, err
    assert not (tmp_path / "run").exists()  # refused: nothing left behind
    config = zoo_models.get("llama-tiny").replace(n_layers=1, d_model=16, mlp_hidden=32)
    zoo_models.save_hf(
        zoo_models.build(config, key=jax.random.key(0)),
        tmp_path / "hf",
        tokenizer=zoo_models.ByteTokenizer(),
    )
    hf = json.loads((tmp_path / "hf" / "config.json").read_text())
    hf["num_hidden_layers"] = 10**7
    (tmp_path / "hf" / "config.json").write_text(json.dumps(hf))
    for command in (["eval", str(tmp_path / "hf")], ["convert", str(tmp_path / "hf"), "x"]):
        assert main(command) == 3
        err = capsys.readouterr().err.strip()
        assert f"{zoo_models.num_params(config.replace(n_layers=10**7)):,} parameters" in err, err


def _address_space() -> int:
    status = pathlib.Path("/proc/self/status").read_text()
    return int(status.split("VmSize:")[1].split()[0]) * 1024


def test_a_model_within_the_host_but_over_ulimit_v_is_refused(tmp_path, capsys):
    # A model of 400M parameters or more (6.4 GB with gradients and AdamW moments) fits this
    # host's memory but not an address-space limit 3 GiB above what the process holds: refused before
    # building it, naming the limit (it died in XLA allocating, with a traceback).
    import resource

    import zoo_models
    from zoo_train.data import byte_tokenizer

    write_corpus(tmp_path / "corpus", files=2, lines=5)
    limit = _address_space() + 3 * 2**30
    vocab = byte_tokenizer().vocab_size
    wide = {"d_model": 1024, "mlp_hidden": 4096, "n_heads": 16}
    base = zoo_models.get("llama-tiny").replace(vocab_size=vocab, **wide)
    # float32 parameters, gradients, two moments: 16 bytes a parameter. Layers enough to need a
    # quarter more than the limit, whatever this process already maps (more on some legs).
    per_layer = 16 * (
        zoo_models.num_params(base.replace(n_layers=2))
        - zoo_models.num_params(base.replace(n_layers=1))
    )
    changes = {**wide, "n_layers": max(24, math.ceil(1.25 * limit / per_layer))}
    config = base.replace(n_layers=changes["n_layers"])
    need = 4 * 4 * zoo_models.num_params(config)
    assert limit < need < zoo_models.host_memory_bytes() or limit > 2**40
    sets = [a for k, v in changes.items() for a in ("--set", f"model_config.{k}={v}")]
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    try:
        code = main(["train", "--data", str(tmp_path / "corpus"), "--out", str(tmp_path / "run"),
                     *sets])  # fmt: skip
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
    err = capsys.readouterr().err.strip()
    assert code == 3 and len(err.splitlines()) == 1, err
    assert f"{zoo_models.num_params(config):,} parameters" in err, err
    assert "address-space limit set by ulimit -v" in err and f"({limit / 2**30:.2f} GiB)" in err, (
        err
    )
    assert not (tmp_path / "run").exists()


def test_xla_out_of_memory_is_one_sentence_with_the_sizes(tmp_path):
    # Activations no check foresees (100,000 rows): XLA's RESOURCE_EXHAUSTED, under a memory
    # limit that makes the allocation fail rather than wake the kernel's OOM killer.
    import resource

    write_corpus(tmp_path / "corpus", files=2, lines=5)
    limit = 6 * 2**30

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit, resource.getrlimit(resource.RLIMIT_AS)[1]))

    code = "import sys; from zoo_train.cli import main; sys.exit(main())"
    proc = subprocess.run(
        [sys.executable, "-c", code, "train", "--data", "corpus", "--out", "run",
         "--batch-size", "100000", "--seq-len", "64", "--steps", "1", "--no-progress",
         "--sample-tokens", "0", "--eval-every", "0"],
        cwd=tmp_path, capture_output=True, text=True, preexec_fn=cap, timeout=300,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )  # fmt: skip
    err = proc.stderr.strip().splitlines()
    assert proc.returncode == 3, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    line = err[-1]
    assert line.startswith("zoo train: error: Out of memory: an allocation of ") and line.endswith(
        "."
    ), line
    assert "GiB failed (this process's address-space limit set by ulimit -v: 6.0 GiB)" in line
    assert "lower --batch-size or --seq-len" in line, line


def test_metrics_of_a_path_that_does_not_exist_says_so(tmp_path, capsys):
    assert main(["metrics", str(tmp_path / "nonexist")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith(f"{str(tmp_path / 'nonexist')!r} does not exist; pass a zoo run directory.")
    assert main(["metrics", str(tmp_path)]) == 2  # a directory, but not a run's
    assert "holds no metrics.jsonl" in capsys.readouterr().err
