"""The data pipeline is zoo-data's: `zoo_train.data` and the `zoo_models` tokenizer names are
zoo-data's own objects, and `zoo data ...` is `zoo-data ...` (one implementation, the same
output)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from cli_helpers import write_corpus

import zoo_data
import zoo_data.cli
import zoo_models
import zoo_train.data
import zoo_train.data.inputs
import zoo_train.data.store
from zoo_train.cli import main

# The public names zoo_train.data had before the move (each must still be there).
DATA_NAMES = [
    "Batch",
    "DataSource",
    "Document",
    "DocumentStream",
    "HeldOut",
    "PackedLoader",
    "StoreLoader",
    "TokenStore",
    "Tokenizer",
    "byte_tokenizer",
    "check_store",
    "holds_pairs",
    "is_byte_level",
    "is_store",
    "leading_bos",
    "load_documents",
    "pack_documents",
    "prepare_store",
    "render_chat",
    "rows_to_batch",
    "skipped_sentence",
    "split_documents",
    "split_rows",
    "stdlib_corpus",
    "stdlib_files",
    "store_info",
    "tokenize_documents",
    "tokenize_examples",
]
STORE_NAMES = [
    "BLOCK_BYTES",
    "Damage",
    "DamagedStoreError",
    "HeldOut",
    "Mixture",
    "RowLayout",
    "StoreLoader",
    "TokenSplit",
    "TokenStore",
    "VERSION",
    "VerifyReport",
    "check_store",
    "describe_info",
    "is_store",
    "layout",
    "permute",
    "prepare_store",
    "store_info",
    "tokenizer_identity",
    "verify_store",
]
MODEL_NAMES = [
    "ByteTokenizer",
    "ChatTemplate",
    "ChatTemplateError",
    "HFTokenizer",
    "RenderedChat",
    "load_tokenizer",
]


def test_the_old_names_are_zoo_datas_objects():
    for name in DATA_NAMES:
        assert getattr(zoo_train.data, name) is getattr(zoo_data, name), name
    for name in STORE_NAMES:
        assert getattr(zoo_train.data.store, name) is getattr(zoo_data.store, name), name
    assert zoo_train.data.inputs.DocumentStream is zoo_data.inputs.DocumentStream
    for name in MODEL_NAMES:
        assert getattr(zoo_models, name) is getattr(zoo_data, name), name
    assert zoo_models.Tokenizer is zoo_data.ZooTokenizer


@pytest.fixture
def corpus(tmp_path):
    return write_corpus(tmp_path / "in", files=6, seed=int(np.random.default_rng().integers(99)))


def test_zoo_data_and_the_zoo_data_command_print_the_same(corpus, tmp_path, capsys):
    out = [tmp_path / "a", tmp_path / "b"]
    assert main(["data", "prepare", str(corpus), "--out", str(out[0]), "--no-progress"]) == 0
    said = capsys.readouterr().out
    assert zoo_data.cli.main(["prepare", str(corpus), "--out", str(out[1]), "--no-progress"]) == 0
    assert capsys.readouterr().out == said.replace(str(out[0]), str(out[1]))
    infos = []
    for run, prefix in ((main, ["data"]), (zoo_data.cli.main, [])):
        assert run([*prefix, "info", str(out[0]), "--json"]) == 0
        infos.append(json.loads(capsys.readouterr().out))
        assert run([*prefix, "verify", str(out[0]), "--no-progress"]) == 0
        assert "intact" in capsys.readouterr().out
    assert infos[0] == infos[1]
    assert infos[0]["fingerprint"] == zoo_data.store_info(out[1])["fingerprint"]
    # An error: the same sentence after each command's own prefix.
    errors = []
    for run, prefix in ((main, ["data"]), (zoo_data.cli.main, [])):
        assert run([*prefix, "info", str(corpus)]) == 2
        errors.append(capsys.readouterr().err.strip())
    assert errors[0].startswith("zoo data: error: ")
    assert errors[1].startswith("zoo-data info: error: ")
    assert errors[0].split(": error: ")[1] == errors[1].split(": error: ")[1]
