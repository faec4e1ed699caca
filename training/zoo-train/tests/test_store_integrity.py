"""A token store proves its content: block hashes written by prepare and checked by `zoo data
verify`, by the reader the first time it reads a block, and every batch's ids checked against
the model's vocabulary; stores made before block hashes still open."""

from __future__ import annotations

import json
import pathlib
import shutil

import numpy as np
import pytest
import xxhash
from cli_helpers import WORDS, write_corpus

import zoo_train
from zoo_train import Checkpointer
from zoo_train.cli import main
from zoo_train.data import StoreLoader, TokenStore, prepare_store
from zoo_train.data.store import BLOCK_BYTES, DamagedStoreError, verify_store
from zoo_train.data.store._blocks import BlockHasher

TRAIN = [
    "train", "--model", "llama-tiny", "--batch-size", "4", "--seq-len", "32", "--no-progress",
    "--sample-tokens", "0", "--eval-every", "0", "--set", "model_config.n_layers=1",
    "--set", "model_config.d_model=32", "--set", "model_config.mlp_hidden=64",
]  # fmt: skip
SHARD = "train/00000.tokens"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    """A small intact store (one block per file), copied by each test that damages it."""
    root = tmp_path_factory.mktemp("store")
    write_corpus(
        root / "corpus", files=12, lines=40, seed=int(np.random.default_rng().integers(99))
    )
    prepare_store(root / "corpus", root / "store", workers=1, progress=False)
    return root / "store"


def _copy(store: pathlib.Path, where: pathlib.Path) -> pathlib.Path:
    return pathlib.Path(shutil.copytree(store, where))


def _swap_tokens(path: pathlib.Path, rng: np.random.Generator, lo: int = 0, hi: int = -1) -> int:
    """Swap two different token ids of ``path`` (uint16) between items ``lo`` and ``hi``: every
    id stays in range and the size is unchanged. Returns the first item's byte offset."""
    ids = np.fromfile(path, np.uint16)
    hi = len(ids) if hi < 0 else hi
    while True:
        i, j = sorted(rng.choice(np.arange(lo, hi), 2, replace=False).tolist())
        if ids[i] != ids[j]:
            break
    ids[i], ids[j] = ids[j], ids[i]
    ids.tofile(path)
    return 2 * i


def _strip_hashes(store: pathlib.Path) -> None:
    """Make ``store`` what an older zoo wrote: a manifest without block hashes."""
    manifest = json.loads((store / "manifest.json").read_text())
    del manifest["blocks"]
    for shard in manifest["shards"]:
        for record in shard["files"]:
            del record["blocks"]
    (store / "manifest.json").write_text(json.dumps(manifest))


def test_block_hashes_match_each_block_hashed_on_its_own():
    rng = np.random.default_rng()
    block = 1 << int(rng.integers(4, 9))
    data = rng.integers(0, 256, int(rng.integers(1, 40 * block)), dtype=np.uint8).tobytes()
    hasher = BlockHasher(block)
    at = 0
    while at < len(data):  # pieces of any size, across block boundaries
        step = int(rng.integers(1, 3 * block))
        hasher.update(memoryview(data)[at : at + step])
        at += step
    expected = [xxhash.xxh3_64_hexdigest(data[i : i + block]) for i in range(0, len(data), block)]
    assert hasher.finish() == expected


def test_verify_passes_an_intact_store_and_names_a_shard_whose_bytes_were_swapped(
    store, tmp_path, capsys
):
    assert main(["data", "verify", str(store), "--no-progress"]) == 0
    assert "intact" in capsys.readouterr().out
    damaged = _copy(store, tmp_path / "damaged")
    size = (damaged / SHARD).stat().st_size
    _swap_tokens(damaged / SHARD, np.random.default_rng())
    assert (damaged / SHARD).stat().st_size == size
    assert main(["data", "verify", str(damaged), "--no-progress"]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert SHARD in err and f"bytes 0-{size - 1:,}" in err and str(damaged) in err
    assert f"damaged: {SHARD} bytes 0-{size - 1:,}" in captured.out
    assert "eval/" not in err  # only the damaged shard is named


def test_the_reader_checks_a_block_when_it_first_reads_it(tmp_path):
    # Three blocks of tokens; a swap inside the middle one. Rows of the other blocks read
    # fine, a row touching the middle one is refused, naming the shard and the bytes.
    rng = np.random.default_rng()
    text = " ".join(rng.choice(WORDS, 300_000).tolist())
    (tmp_path / "big.txt").write_text(text)
    prepare_store(tmp_path / "big.txt", tmp_path / "s", workers=1, progress=False)
    half = BLOCK_BYTES // 2  # items of uint16 per block
    tokens = tmp_path / "s" / SHARD
    assert tokens.stat().st_size > 2 * BLOCK_BYTES
    _swap_tokens(tokens, rng, half + 40, 2 * half - 40)
    report = verify_store(tmp_path / "s", progress=False)
    assert [(d.name, d.start, d.stop) for d in report.damaged] == [
        (SHARD, BLOCK_BYTES, 2 * BLOCK_BYTES)
    ]
    loader = StoreLoader(tmp_path / "s", seq_len=31, shuffle=False)
    first = half // 31 - 2  # rows wholly inside block 0
    assert loader.batch(0, 4, None) is not None and loader.rows(first, first + 1) is not None
    row = (half + half // 2) // 31  # inside block 1
    with pytest.raises(
        DamagedStoreError, match=rf"bytes 1,048,576-2,097,151 of its shard file {SHARD}"
    ):
        loader.rows(row, row + 1)
    # Without the check, the same rows read (what the bench compares).
    unchecked = StoreLoader(
        TokenStore(tmp_path / "s", check_blocks=False), seq_len=31, shuffle=False
    )
    assert unchecked.rows(row, row + 1)["input_ids"].shape == (1, 31)


def test_train_stops_before_training_on_changed_rows_and_keeps_the_checkpoint(
    store, tmp_path, capsys
):
    data = _copy(store, tmp_path / "data")
    run = tmp_path / "run"
    assert main([*TRAIN, "--data", str(data), "--steps", "2", "--out", str(run)]) == 0
    _swap_tokens(data / SHARD, np.random.default_rng())
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
        _strip_hashes(data)
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


def test_an_old_store_without_hashes_opens_and_info_says_it_carries_none(store, tmp_path, capsys):
    old = _copy(store, tmp_path / "old")
    _strip_hashes(old)
    rng = np.random.default_rng()
    step = int(rng.integers(0, 50))
    batches = [StoreLoader(s, seq_len=32, seed=3).batch(step, 4) for s in (store, old)]
    for key, value in batches[0].items():
        np.testing.assert_array_equal(value, batches[1][key])
    assert not TokenStore(old).split("train").checked and TokenStore(store).split("train").checked
    assert main(["data", "info", str(old)]) == 0
    assert "hashes      none" in capsys.readouterr().out
    assert main(["data", "info", str(old), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["block_hashes"] is None
    assert main(["data", "info", str(store)]) == 0
    assert "hashes      xxh3_64 per 1 MiB block" in capsys.readouterr().out
    # verify falls back to the files' sha256: intact, then a swap is found.
    assert main(["data", "verify", str(old), "--no-progress"]) == 0
    assert "whole-file checksums" in capsys.readouterr().out
    _swap_tokens(old / SHARD, rng)
    assert main(["data", "verify", str(old), "--no-progress"]) == 2
    assert SHARD in capsys.readouterr().err
