"""A damaged token store stops training before a step trains on it: changed rows are caught by
their block hashes, and every batch's ids are checked against the model's vocabulary (the store
itself is zoo-data's, tested there)."""

from __future__ import annotations

import pathlib
import shutil

import numpy as np
import pytest
from cli_helpers import write_corpus

import zoo_train
from zoo_data import StoreLoader, TokenStore, prepare_store
from zoo_data.testing import strip_hashes, swap_tokens
from zoo_train import Checkpointer
from zoo_train.cli import main

TRAIN = [
    "train", "--model", "llama-tiny", "--batch-size", "4", "--seq-len", "32", "--no-progress",
    "--sample-tokens", "0", "--eval-every", "0", "--set", "model_config.n_layers=1",
    "--set", "model_config.d_model=32", "--set", "model_config.mlp_hidden=64",
]  # fmt: skip
SHARD = "train/00000.tokens"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    """A small intact store, copied by each test that damages it."""
    root = tmp_path_factory.mktemp("store")
    seed = int(np.random.default_rng().integers(99))
    write_corpus(root / "corpus", files=12, lines=40, seed=seed)
    prepare_store(root / "corpus", root / "store", workers=1, progress=False)
    return root / "store"


def _copy(store: pathlib.Path, where: pathlib.Path) -> pathlib.Path:
    return pathlib.Path(shutil.copytree(store, where))


def test_train_stops_before_training_on_changed_rows_and_keeps_the_checkpoint(
    store, tmp_path, capsys
):
    data = _copy(store, tmp_path / "data")
    run = tmp_path / "run"
    assert main([*TRAIN, "--data", str(data), "--steps", "2", "--out", str(run)]) == 0
    swap_tokens(data / SHARD, np.random.default_rng())
    rows = StoreLoader(TokenStore(data, check_blocks=False), seq_len=32).rows_per_epoch[0]
    steps = 2 + -(-rows // 4)  # every row of the store at least once
    capsys.readouterr()
    assert main([*TRAIN, "--data", str(data), "--steps", str(steps), "--out", str(run)]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("zoo train: error: The token store") and str(data) in err
    assert SHARD in err and "prepare it again" in err and "learning rate" not in err
    ckpt = Checkpointer(run / "checkpoints")
    try:
        assert ckpt.steps() == [2]
    finally:
        ckpt.close()
    trained = [
        r["step"] for r in zoo_train.read_metrics(run / zoo_train.METRICS_FILE) if "loss" in r
    ]
    assert max(trained) == 2


@pytest.mark.parametrize("hashes", [True, False], ids=["hashed", "old-format"])
def test_a_shard_of_0xff_ids_stops_training_naming_the_data(store, tmp_path, capsys, hashes):
    data = _copy(store, tmp_path / "data")
    if not hashes:
        strip_hashes(data)
    size = (data / SHARD).stat().st_size
    (data / SHARD).write_bytes(b"\xff" * size)
    run = tmp_path / "run"
    assert main([*TRAIN, "--data", str(data), "--steps", "3", "--out", str(run)]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert str(data) in err and "learning rate" not in err and "nan" not in err
    if hashes:
        assert SHARD in err and "do not match the hash" in err
    else:  # nothing to check the bytes against: the ids against the model's vocabulary
        assert "token id 65,535, outside the model's vocabulary of 257 ids" in err
    assert not list((run / "checkpoints").glob("[0-9]*"))
