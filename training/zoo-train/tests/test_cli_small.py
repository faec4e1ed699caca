"""Small command-line and data behaviours, in process: warm-up, refusals, help, version, data
files, document ids and positions."""

from __future__ import annotations

import json
import logging
import pathlib

import numpy as np
import pytest

from zoo_train._optim import default_warmup, make_schedule
from zoo_train.cli import build_parser, main
from zoo_train.data import load_documents, split_documents
from zoo_train.settings import resolve_settings
from zoo_train.testing import WORDS, tiny_hf_llama, tiny_tokenizer


def _settings(command: str, *assignments: str, **flags):
    return resolve_settings(
        command=command, config_file=None, assignments=list(assignments), flags=flags
    )


def test_warmup_is_a_fraction_of_the_run_and_short_runs_decay():
    config = _settings("finetune", steps=40).train_config().optimizer
    assert config.warmup_steps == 10  # 5 % of 40 is 2: the floor of 10 steps
    schedule = make_schedule(config, 40)
    assert float(schedule(39)) < 0.2 * config.lr  # decayed by the end (was still at peak)
    assert _settings("finetune").train_config().optimizer.warmup_steps == 10  # 200 steps
    assert _settings("train").train_config().optimizer.warmup_steps == 100  # 800 steps
    assert _settings("finetune", steps=4000).train_config().optimizer.warmup_steps == 200
    assert default_warmup(6, 0.05) == 3  # at most half the run
    explicit = _settings("finetune", "optimizer.warmup_steps=7", steps=40)
    assert explicit.train_config().optimizer.warmup_steps == 7


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--lora-rank", "-2"], "`lora.rank` (--lora-rank) must be at least 0, got -2"),
        (["--model", "llama-small"], "drop --model"),
        (["--model", "llama-tiny"], "drop --model"),  # the default preset's name too
    ],
)
def test_finetune_refusals(tmp_path, capsys, args, needle):
    flags = ["finetune", "--from-hf", str(tmp_path), "--out", str(tmp_path / "o"), *args]
    assert main(flags) == 2
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err


def test_finetune_help_shows_its_own_defaults_and_version_lists_packages(capsys):
    text = build_parser()._subparsers._group_actions[0].choices["finetune"].format_help()
    text = " ".join(text.split())
    assert "optimizer steps (default: 200)" in text
    assert "peak learning rate (default: 0.0001)" in text
    assert "--model" not in text  # refused by finetune: not offered with train's default
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    lines = capsys.readouterr().out.split("\n")
    names = {line.split()[0] for line in lines if line}
    assert {"zoo-train", "zoo-models", "zoo-layers", "zoo-attention"} <= names


def test_text_field_setting(tmp_path, capsys):
    (tmp_path / "d.jsonl").write_text(json.dumps({"content": "hello"}) + "\n")
    with pytest.raises(ValueError, match="--set text_field=NAME"):
        load_documents(tmp_path / "d.jsonl")
    assert [d.text for d in load_documents(tmp_path / "d.jsonl", text_field="content")] == ["hello"]
    assert _settings("train", "text_field=content").text_field == "content"
    # zoo eval reads such data too: as the same texts under "text" evaluate.
    tiny_hf_llama(tmp_path / "hf")
    texts = [" ".join(np.random.default_rng().choice(WORDS, 12)) for _ in range(3)]
    for field in ("content", "text"):
        lines = "".join(json.dumps({field: t}) + "\n" for t in texts)
        (tmp_path / f"{field}.jsonl").write_text(lines)
    args = ["eval", str(tmp_path / "hf"), "--seq-len", "32", "--batch-size", "2", "--json"]
    assert main([*args, "--data", str(tmp_path / "content.jsonl")]) == 2
    assert "--text-field NAME" in capsys.readouterr().err
    assert main([*args, "--data", str(tmp_path / "text.jsonl")]) == 0
    want = json.loads(capsys.readouterr().out)
    extra = ["--data", str(tmp_path / "content.jsonl"), "--text-field", "content"]
    assert main([*args, *extra]) == 0
    assert json.loads(capsys.readouterr().out) == want


def test_binary_files_are_skipped_with_a_count_and_refused_by_name(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "a.txt").write_text("plain text")
    (data / "image.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00binary")
    (data / "latin.txt").write_bytes("caf\xe9".encode("latin-1"))
    told = []
    docs = load_documents(data, on_skipped=lambda n, example: told.append((n, example)))
    assert [d.text for d in docs] == ["plain text"]
    assert told == [(2, str(data / "image.png"))]
    with pytest.raises(ValueError, match="binary or non-UTF-8"):
        load_documents(data / "image.png")


def test_document_ids_do_not_depend_on_path_spelling(tmp_path, monkeypatch):
    data = tmp_path / "data"
    (data / "sub").mkdir(parents=True)
    for i in range(30):
        (data / "sub" / f"f{i}.txt").write_text(f"text {i}")
    monkeypatch.chdir(tmp_path)
    spellings = ["data", str(data), "./data/", str(data / "sub" / "..")]
    splits = [split_documents(load_documents(p), val_fraction=0.2) for p in spellings]
    ids = [([d.id for d in train], [d.id for d in val]) for train, val in splits]
    assert all(i == ids[0] for i in ids) and ids[0][1]


def test_eval_refuses_rows_longer_than_the_positions(tmp_path, capsys):
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config(vocab_size=256, n_embd=16, n_layer=1, n_head=2, n_positions=16)
    GPT2LMHeadModel(config).save_pretrained(tmp_path / "gpt2")
    tiny_tokenizer(pathlib.Path(tmp_path / "gpt2"))
    (tmp_path / "t.txt").write_text("alpha beta " * 40)
    assert (
        main(["eval", str(tmp_path / "gpt2"), "--data", str(tmp_path / "t.txt"), "--seq-len", "32"])
        == 2
    )
    assert "exceeds the model's 16 positions" in capsys.readouterr().err


def test_eval_data_replaces_the_split_and_one_file_is_never_cut(tmp_path, caplog):
    from zoo_train.data import byte_tokenizer
    from zoo_train.recipes import build_data

    tok = byte_tokenizer()
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for i in range(20):
        (corpus / f"d{i}.txt").write_text("alpha beta gamma " * 20)
    (tmp_path / "held.txt").write_text("delta " * 40)
    (tmp_path / "short.txt").write_text("tiny")
    common = {"data": [str(corpus)], "seq_len": 16, "out": str(tmp_path / "o")}
    s = _settings("train", **common, eval_data=[str(tmp_path / "held.txt")])
    with build_data(s, tok) as data:
        (store,) = data.train.stores
        assert store.manifest["splits"]["train"]["documents"] == 20  # every document trains
        assert list(data.val) == ["held.txt"] and data.val["held.txt"].rows == 15  # 240 bytes
    # Held-out data shorter than one row is evaluated (one padded row), not dropped.
    s = _settings("train", **common, eval_data=[str(tmp_path / "short.txt")])
    with build_data(s, tok) as data:
        (batch,) = data.val["short.txt"].eval_batches(2)
        assert batch["loss_mask"].sum() == len(tok.encode("tiny"))  # every target up to the EOS
    assert _settings("finetune", eval_data=["x"]).eval_data == ["x"]
    # A corpus of one file is never cut into a training and a held-out part: nothing is held
    # out, and the run is told so.
    lines = [f"line {i}\n" for i in range(400)]
    (tmp_path / "corpus.txt").write_text("".join(lines))
    one = _settings("train", data=[str(tmp_path / "corpus.txt")], seq_len=16, out=common["out"])
    with caplog.at_level(logging.WARNING), build_data(one, tok) as data:
        (store,) = data.train.stores
        assert store.manifest["splits"]["train"]["documents"] == 1
        assert not data.val or sum(part.rows for part in data.val.values()) == 0
    assert any("none was held out" in r.getMessage() for r in caplog.records), caplog.text


def test_every_numeric_setting_declares_its_range():
    # Each is checked (finite, in range) when it is read, before anything is loaded.
    from zoo_train.settings import FinetuneSettings, keys

    numbers = {
        k: v
        for k, v in keys(FinetuneSettings()).items()
        if v.kind.rstrip("?") in ("int", "float", "floats")
    }
    unchecked = sorted(k for k, v in numbers.items() if v.within is None)
    assert unchecked == [
        "mesh.context",
        "mesh.data",
        "mesh.expert",
        "mesh.fsdp",
        "mesh.tensor",
    ]  # MeshConfig checks
    for key in numbers.values():
        if key.within is not None:
            values = key.default if isinstance(key.default, list) else [key.default]
            assert all(v is None or v in key.within for v in values), key.name


def test_generation_is_capped_at_what_ulimit_v_leaves():
    # A model whose positions allow a billion tokens: its cache may take half of what the
    # address-space limit leaves, no more (it was allocated whole, or died in XLA).
    import resource

    import equinox as eqx
    import jax

    import zoo_models
    from zoo_train import new_token_budget

    config = zoo_models.get("llama-tiny").replace(max_position=10**9)
    model = eqx.filter_eval_shape(zoo_models.build, config, key=jax.random.key(0))
    per_token = 2 * config.n_layers * config.kv_heads * config.dim_per_head * 4  # float32
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    status = pathlib.Path("/proc/self/status").read_text()
    size = int(status.split("VmSize:")[1].split()[0]) * 1024
    spare = int(np.random.default_rng().integers(2**30, 2**31))
    resource.setrlimit(resource.RLIMIT_AS, (size + spare, hard))
    try:
        budget, why = new_token_budget(model, 7, 10**12)
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
    assert abs(budget - (spare // 2 // per_token - 7)) < 2**20 // per_token, (budget, spare)
    assert "ulimit -v" in why
    assert new_token_budget(model, 7, 100) == (100, None)
    with pytest.raises(ValueError, match="fills the model's 128 positions"):
        new_token_budget(eqx.filter_eval_shape(zoo_models.build, config.replace(max_position=128),
                                               key=jax.random.key(0)), 128, 1)  # fmt: skip


def test_presets_train_from_scratch_with_the_byte_tokenizer():
    # GPT-2's special ids (50256) name no byte token: the tokenizer's own stand in.
    from zoo_train.data import byte_tokenizer
    from zoo_train.recipes import preset_config

    tokenizer = byte_tokenizer()
    for preset in ("gpt2", "gpt2-medium", "qwen2-0.5b", "llama-3.2-1b"):
        config = preset_config(_settings("train", model=preset), tokenizer)
        assert config.vocab_size == tokenizer.vocab_size
        assert config.eos_token_id == tokenizer.eos_id
        assert config.bos_token_id in (None, tokenizer.bos_id)


def test_log_lines_are_the_commands_own_and_leave_the_callers_logging(monkeypatch, capsys):
    import io
    import logging

    from zoo_train.cli import _main

    def command(name, body) -> int:
        logging.getLogger("zoo_train").warning("a note %d", 7)
        return 0

    monkeypatch.setattr(_main, "run_command", command)
    root = logging.getLogger()
    before = list(root.handlers)
    # No stream handler yet: the command adds one for its own lines and takes it away after,
    # so a later line is not written to a stream of this command's (here: one captured).
    assert main(["models"]) == 0
    assert capsys.readouterr().err == "zoo: a note 7\n"
    assert root.handlers == before
    # The handler absl installs on importing Orbax (Python's default format): reformatted,
    # not doubled by a second one.
    absl_like = logging.StreamHandler(io.StringIO())
    absl_like.setFormatter(logging.Formatter(logging.BASIC_FORMAT))
    monkeypatch.setattr(root, "handlers", [*before, absl_like])
    assert main(["models"]) == 0
    assert absl_like.stream.getvalue() == "zoo: a note 7\n"
    assert capsys.readouterr().err == ""
    assert root.handlers == [*before, absl_like]


def test_log_lines_read_zoo_colon_message_even_after_absl_configured_logging(capsys):
    import io
    import logging

    # What absl does on its first log: the root logger with Python's default format.
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter(logging.BASIC_FORMAT))
    logging.getLogger().addHandler(handler)
    try:
        assert main(["models"]) == 0
        logging.getLogger("zoo_models").warning("note: cast to float32")
    finally:
        logging.getLogger().removeHandler(handler)
    # One prefix for every status line, whichever package logs it.
    assert stream.getvalue() == "zoo: note: cast to float32\n"
