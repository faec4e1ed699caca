"""A token store proves its content: block hashes written by prepare and checked by `zoo-data
verify` and by the reader the first time it reads a block; stores made before block hashes
still open."""

from __future__ import annotations

import json
import pathlib
import shutil

import numpy as np
import pytest
import xxhash

from zoo_data import StoreLoader, TokenStore, prepare_store
from zoo_data.cli import main
from zoo_data.store import BLOCK_BYTES, DamagedStoreError, verify_store
from zoo_data.store._blocks import BlockHasher
from zoo_data.testing import WORDS, strip_hashes, swap_tokens, write_corpus

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
    assert main(["verify", str(store), "--no-progress"]) == 0
    assert "intact" in capsys.readouterr().out
    damaged = _copy(store, tmp_path / "damaged")
    size = (damaged / SHARD).stat().st_size
    swap_tokens(damaged / SHARD, np.random.default_rng())
    assert (damaged / SHARD).stat().st_size == size
    assert main(["verify", str(damaged), "--no-progress"]) == 2
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
    swap_tokens(tokens, rng, half + 40, 2 * half - 40)
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


def test_an_old_store_without_hashes_opens_and_info_says_it_carries_none(store, tmp_path, capsys):
    old = _copy(store, tmp_path / "old")
    strip_hashes(old)
    rng = np.random.default_rng()
    step = int(rng.integers(0, 50))
    batches = [StoreLoader(s, seq_len=32, seed=3).batch(step, 4) for s in (store, old)]
    for key, value in batches[0].items():
        np.testing.assert_array_equal(value, batches[1][key])
    assert not TokenStore(old).split("train").checked and TokenStore(store).split("train").checked
    assert main(["info", str(old)]) == 0
    assert "hashes      none" in capsys.readouterr().out
    assert main(["info", str(old), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["block_hashes"] is None
    assert main(["info", str(store)]) == 0
    assert "hashes      xxh3_64 per 1 MiB block" in capsys.readouterr().out
    # verify falls back to the files' sha256: intact, then a swap is found.
    assert main(["verify", str(old), "--no-progress"]) == 0
    assert "whole-file checksums" in capsys.readouterr().out
    swap_tokens(old / SHARD, rng)
    assert main(["verify", str(old), "--no-progress"]) == 2
    assert SHARD in capsys.readouterr().err
