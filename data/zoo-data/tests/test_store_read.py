"""Reading token stores: rows as windows with document segments, the order as a pure function of
the step on any number of processes, mixtures, packed examples, and damage."""

from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest
from store_helpers import random_texts, write_format

import zoo_data
from zoo_data import DataSource, StoreLoader, TokenStore, prepare_store
from zoo_data.cli import main
from zoo_data.store import permute
from zoo_data.testing import tiny_tokenizer

T = 16


def _store(
    root: pathlib.Path, name: str, count: int, seed: int, **kw
) -> tuple[pathlib.Path, list[str]]:
    texts = random_texts(count, seed=seed, max_len=80)
    source = write_format(root / f"{name}-in", "jsonl", texts)
    prepare_store(
        [source], root / name, eval_fraction=kw.pop("eval_fraction", 0.2), progress=False, **kw
    )
    return root / name, texts


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    root = tmp_path_factory.mktemp("stores")
    return {
        name: _store(root, name, count, seed)
        for name, count, seed in (("a", 90, 1), ("b", 40, 2), ("c", 25, 3))
    }


def _reference(
    texts: list[str], train_ids: set[int] | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """The token stream of ``texts`` as the byte tokenizer makes it (UTF-8 then EOS 256) and the
    document each token belongs to."""
    docs = [np.array([*t.encode(), 256]) for t in texts]
    owner = np.concatenate([np.full(len(d), i) for i, d in enumerate(docs)])
    return np.concatenate(docs), owner


def _train_texts(path: pathlib.Path, texts: list[str]) -> list[str]:
    store = TokenStore(path)
    part = store.split("train")
    got = [bytes(part.document(i)[0][:-1].tolist()).decode() for i in range(part.num_documents)]
    assert set(got) <= set(texts) and len(got) < len(texts)  # some were held out
    return got


def test_permutation_is_a_bijection_and_epochs_differ():
    for n in (1, 2, 3, 5, 17, 100, 1000, 4097):
        for epoch in (0, 1):
            out = permute(np.arange(n), n, seed=3, epoch=epoch)
            assert sorted(out.tolist()) == list(range(n))
    a = permute(np.arange(1000), 1000, seed=3, epoch=0)
    assert not np.array_equal(a, permute(np.arange(1000), 1000, seed=3, epoch=1))
    assert not np.array_equal(a, permute(np.arange(1000), 1000, seed=4, epoch=0))
    assert abs(np.corrcoef(a, np.arange(1000))[0, 1]) < 0.2
    # A batch's few rows take a Python-integer path: the same permutation.
    for n in (7, 4097, 10**9):
        index = np.arange(300) * 7919 % n
        pieces = np.concatenate([permute(index[i : i + 12], n, seed=3) for i in range(0, 300, 12)])
        np.testing.assert_array_equal(pieces, permute(index, n, seed=3))


def test_rows_are_windows_of_the_stream_with_document_segments(stores):
    path, texts = stores["a"]
    stream, owner = _reference(_train_texts(path, texts))
    loader = StoreLoader(path, seq_len=T, shuffle=False)
    rows = loader.rows_per_epoch[0]
    assert rows == (len(stream) - 1) // T  # every token but the first is a target once
    batch = loader.next_batch(rows)
    for r in range(rows):
        window, who = stream[r * T : r * T + T + 1], owner[r * T : r * T + T + 1]
        np.testing.assert_array_equal(batch["input_ids"][r], window[:-1])
        np.testing.assert_array_equal(batch["targets"][r], window[1:])
        seg, pos = [], []
        for t in range(T):
            new = t == 0 or who[t] != who[t - 1]
            seg.append((seg[-1] if seg else 0) + new)
            pos.append(0 if new else pos[-1] + 1)
        np.testing.assert_array_equal(batch["segment_ids"][r], seg)
        np.testing.assert_array_equal(batch["positions"][r], pos)
        np.testing.assert_array_equal(batch["loss_mask"][r], who[:-1] == who[1:])


def test_each_row_once_per_epoch_and_the_batch_is_its_rows(stores):
    path, _ = stores["a"]
    loader = StoreLoader(path, seq_len=T, seed=7)
    rows = loader.rows_per_epoch[0]
    _, first = loader.sources(0, rows)
    _, second = loader.sources(rows, 2 * rows)
    assert sorted(first.tolist()) == list(range(rows)) == sorted(second.tolist())
    assert not np.array_equal(first, second)
    straight = StoreLoader(path, seq_len=T, shuffle=False).next_batch(rows)
    batch = loader.batch(0, rows)
    np.testing.assert_array_equal(batch["input_ids"], straight["input_ids"][first])
    assert isinstance(loader, DataSource)


def test_processes_read_only_their_rows_and_together_the_same_batches(stores):
    path, _ = stores["a"]
    one = StoreLoader(path, seq_len=T, seed=1)
    halves = [StoreLoader(path, seq_len=T, seed=1) for _ in range(2)]
    for step in range(40):  # several epochs
        full = one.next_batch(8)
        parts = [h.next_batch(8, rows=(4 * i, 4 * i + 4)) for i, h in enumerate(halves)]
        assert all(len(p["input_ids"]) == 4 for p in parts)  # each reads half the rows
        for key in full:
            np.testing.assert_array_equal(full[key], np.concatenate([p[key] for p in parts]))
            np.testing.assert_array_equal(full[key], one.batch(step, 8)[key])


def test_resume_at_a_random_step_on_another_process_count(stores):
    path, _ = stores["b"]
    rng = np.random.default_rng(0)
    stop = int(rng.integers(5, 30))
    straight = StoreLoader(path, seq_len=T, seed=2)
    expected = [straight.next_batch(6) for _ in range(stop + 10)]
    before = StoreLoader(path, seq_len=T, seed=2)
    for _ in range(stop):
        before.next_batch(6)
    state = json.loads(json.dumps(before.state_dict()))
    after = [StoreLoader(path, seq_len=T, seed=2) for _ in range(3)]
    for loader in after:
        loader.load_state_dict(state)
    for want in expected[stop:]:
        parts = [p.next_batch(6, rows=(2 * i, 2 * i + 2)) for i, p in enumerate(after)]
        for key in want:
            np.testing.assert_array_equal(want[key], np.concatenate([p[key] for p in parts]))


def test_mixture_proportions_and_each_source_row_once_per_epoch(stores):
    paths = [stores[k][0] for k in "abc"]
    weights = [0.5, 0.3, 0.2]
    loader = StoreLoader(paths, seq_len=T, weights=weights, seed=5)
    n, steps = 8, 2000
    source, row = loader.sources(0, n * steps)
    for k, w in enumerate(weights):
        count = int((source == k).sum())
        sigma = (n * steps * w * (1 - w)) ** 0.5
        assert abs(count - n * steps * w) < 3 * sigma
        mine = row[source == k]
        epoch = loader.rows_per_epoch[k]
        assert sorted(mine[:epoch].tolist()) == list(range(epoch))
    # Per step too: every step holds its share of rows, give or take one.
    per_step = np.stack([(source.reshape(steps, n) == k).sum(1) for k in range(3)], 1)
    assert np.all(np.abs(per_step - n * np.array(weights)) <= 1.5)
    batch = loader.batch(3, n)
    parts = [StoreLoader(p, seq_len=T) for p in paths]
    src, rows = loader.sources(3 * n, 4 * n)
    for i in range(n):
        want = parts[src[i]].layouts[0].read(rows[i : i + 1], 256)["input_ids"][0]
        np.testing.assert_array_equal(batch["input_ids"][i], want)
    with pytest.raises(ValueError, match="one weight per store"):
        StoreLoader(paths, seq_len=T, weights=[1, 2])


def test_packed_examples_keep_their_loss_masks(tmp_path):
    tok_dir = tiny_tokenizer(tmp_path / "tok")
    records = [
        {
            "messages": [
                {"role": "user", "content": "alpha " * (i % 4)},
                {"role": "assistant", "content": "beta " * (1 + i % 3)},
            ]
        }
        for i in range(30)
    ] + [{"prompt": "gamma " * 40, "completion": " delta"}]  # longer than a row: cut
    (tmp_path / "c.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    prepare_store(
        [tmp_path / "c.jsonl"], tmp_path / "s", tokenizer=tok_dir, eval_fraction=0, progress=False
    )
    store = TokenStore(tmp_path / "s", tokenizer=zoo_data.load_tokenizer(tok_dir))
    part = store.split("train")
    docs = [part.document(i)[0] for i in range(part.num_documents)]
    masks = [part.document(i)[1] for i in range(part.num_documents)]
    loader = StoreLoader(store, seq_len=32, shuffle=False)
    assert loader.layouts[0].truncated == 1
    batch = loader.next_batch(loader.rows_per_epoch[0])
    # Reference: next fit of whole documents into rows of 33 tokens, in order.
    rows, current = [], []
    for d, m in zip(docs, masks, strict=True):
        d, m = d[:33], m[:33]
        if sum(len(x) for x, _ in current) + len(d) > 33:
            rows.append(current)
            current = []
        current.append((d, m))
    rows.append(current)
    assert len(rows) == len(batch["input_ids"])
    for r, row in enumerate(rows):
        tokens = np.concatenate([d for d, _ in row])
        weight = np.concatenate([m for _, m in row]).astype(np.float32)
        owner = np.concatenate([np.full(len(d), i) for i, (d, _) in enumerate(row)])
        n = len(tokens)
        np.testing.assert_array_equal(batch["input_ids"][r][: n - 1], tokens[:-1])
        want = weight[1:] * (owner[1:] == owner[:-1])
        np.testing.assert_array_equal(batch["loss_mask"][r][: n - 1], want)
        assert (
            batch["loss_mask"][r][n - 1 :].sum() == 0 and (batch["segment_ids"][r][n:] == 0).all()
        )
        # Prompts and user turns weigh nothing (the cut example keeps its prompt alone).
        assert want.sum() < len(want) and (want.sum() > 0 or len(row[0][0]) == 33)


def test_damaged_shards_are_named(tmp_path):
    path, _ = _store(tmp_path, "s", 20, 4)
    shard = path / "train" / "00000.tokens"
    data = bytearray(shard.read_bytes())
    data[10] ^= 1
    shard.write_bytes(bytes(data))
    TokenStore(path)  # opening checks sizes only
    with pytest.raises(
        ValueError, match=r"train/00000.tokens does not match its checksum \(modified\)"
    ):
        TokenStore(path, verify=True)
    assert main(["info", str(path), "--verify"]) == 2
    shard.write_bytes(bytes(data[:-3]))
    with pytest.raises(
        ValueError, match=r"train/00000.tokens has \d+ bytes instead of \d+ \(truncated"
    ):
        TokenStore(path)


def test_another_tokenizer_is_refused_and_the_stores_own_comes_back(stores, tmp_path):
    path, _ = stores["c"]
    with pytest.raises(
        ValueError,
        match=r"made with the byte tokenizer \(fingerprint \w+\), not the run's ByteTokenizer\(bos=True, eos=True\)",
    ):
        TokenStore(path, tokenizer=zoo_data.ByteTokenizer(bos=True, eos=True))
    TokenStore(path, tokenizer=TokenStore(path).tokenizer())
    tok_dir = tiny_tokenizer(tmp_path / "tok")
    (tmp_path / "t.txt").write_text("alpha beta")
    prepare_store([tmp_path / "t.txt"], tmp_path / "bpe", tokenizer=tok_dir, progress=False)
    again = TokenStore(tmp_path / "bpe").tokenizer()
    TokenStore(tmp_path / "bpe", tokenizer=again)
    TokenStore(tmp_path / "bpe", tokenizer=zoo_data.load_tokenizer(tok_dir))
    with pytest.raises(ValueError, match="different tokenizers"):
        StoreLoader([path, tmp_path / "bpe"], seq_len=2)
