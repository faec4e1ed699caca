"""Documents, the split, the stdlib corpus, deterministic shuffling and the loader's position."""

import json

import numpy as np
import pytest

import zoo_data
from zoo_data import (
    Document,
    PackedLoader,
    byte_tokenizer,
    load_documents,
    split_documents,
    stdlib_corpus,
    tokenize_documents,
)
from zoo_data.testing import random_docs


def _take(loader, n, k):
    return [loader.next_batch(n) for _ in range(k)]


def _equal(a, b):
    return all(np.array_equal(x[key], y[key]) for x, y in zip(a, b, strict=True) for key in x)


def test_shuffle_is_deterministic_and_seeded():
    docs = random_docs(3, n=30)
    a = _take(PackedLoader(docs, seq_len=8, seed=5), 4, 30)
    b = _take(PackedLoader(docs, seq_len=8, seed=5), 4, 30)
    c = _take(PackedLoader(docs, seq_len=8, seed=6), 4, 30)
    assert _equal(a, b)
    assert not _equal(a, c)


def test_epochs_reshuffle_and_each_epoch_serves_every_token_once():
    docs = random_docs(4, n=20)
    loader = PackedLoader(docs, seq_len=8, seed=1)
    orders = [loader.epoch_order(e) for e in range(3)]
    assert not np.array_equal(orders[0], orders[1])
    for order in orders:
        assert sorted(order.tolist()) == list(range(len(docs)))
    # One epoch's rows hold the shuffled stream, truncated to whole rows.
    rows = loader.rows_per_epoch
    epoch = loader.next_batch(rows)
    stream = np.concatenate([docs[i] for i in orders[0]])[: rows * 9].reshape(rows, 9)
    np.testing.assert_array_equal(epoch["input_ids"], stream[:, :-1])
    np.testing.assert_array_equal(epoch["targets"], stream[:, 1:])
    assert loader.state_dict() == {"epoch": 1, "row": 0}


def test_loader_resumes_from_its_position():
    docs = random_docs(5, n=25)
    straight = PackedLoader(docs, seq_len=8, seed=2)
    expected = _take(straight, 3, 40)  # crosses several epochs
    first = PackedLoader(docs, seq_len=8, seed=2)
    head = _take(first, 3, 17)
    state = json.loads(json.dumps(first.state_dict()))  # what a checkpoint stores
    resumed = PackedLoader(docs, seq_len=8, seed=2)
    resumed.load_state_dict(state)
    assert _equal(head + _take(resumed, 3, 23), expected)


def test_loader_rejects_positions_and_sizes_that_do_not_fit():
    loader = PackedLoader(random_docs(6, n=5), seq_len=8)
    with pytest.raises(ValueError, match="outside this data"):
        loader.load_state_dict({"epoch": 0, "row": loader.rows_per_epoch})
    with pytest.raises(ValueError, match="fewer than one row"):
        PackedLoader([np.arange(3)], seq_len=8)
    with pytest.raises(ValueError, match="at least 1"):
        loader.next_batch(0)


def test_describe_changes_with_the_data():
    docs = random_docs(7)
    a = PackedLoader(docs, seq_len=8).describe()
    docs[3] = docs[3].copy()
    docs[3][0] += 1
    assert PackedLoader(docs, seq_len=8).describe()["sha256"] != a["sha256"]


def test_split_is_by_document_deterministic_and_stable():
    docs = [Document(f"doc{i}", f"text {i}") for i in range(200)]
    train, val = split_documents(docs, val_fraction=0.1, seed=3)
    assert {d.id for d in train}.isdisjoint({d.id for d in val})
    assert len(train) + len(val) == len(docs)
    assert 5 <= len(val) <= 40
    assert split_documents(docs, val_fraction=0.1, seed=3) == (train, val)
    more = [*docs, *(Document(f"new{i}", "x") for i in range(50))]
    _, val_more = split_documents(more, val_fraction=0.1, seed=3)
    assert {d.id for d in val} <= {d.id for d in val_more}
    # Tiny corpora still get one document on each side.
    t2, v2 = split_documents(docs[:2], val_fraction=0.01)
    assert len(t2) == len(v2) == 1
    with pytest.raises(ValueError, match="val_fraction"):
        split_documents(docs, val_fraction=1.0)


def test_load_documents_files_dirs_globs_jsonl(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "one.txt").write_text("first document")
    (tmp_path / "a" / "two.py").write_text("print('second')")
    (tmp_path / "a" / ".hidden").write_text("skip me")
    (tmp_path / "a" / "empty.txt").write_text("")
    lines = [{"text": "json one"}, {"text": "json two", "meta": 1}]
    (tmp_path / "b.jsonl").write_text("\n".join(json.dumps(x) for x in lines) + "\n\n")
    docs = load_documents([tmp_path / "a", str(tmp_path / "*.jsonl")])
    assert [d.text for d in docs] == ["first document", "print('second')", "json one", "json two"]
    assert docs[2].id.endswith("b.jsonl:1")
    assert [d.text for d in load_documents(str(tmp_path / "**" / "*.py"))] == ["print('second')"]
    (tmp_path / "bad.jsonl").write_text('{"body": "no text"}\n')
    with pytest.raises(ValueError, match="no string field 'text'"):
        load_documents(tmp_path / "bad.jsonl")
    with pytest.raises(ValueError, match="does not exist"):
        load_documents(tmp_path / "missing")
    with pytest.raises(ValueError, match="matches no files"):
        load_documents(str(tmp_path / "*.nothing"))


def test_stdlib_corpus_is_deterministic_and_sized():
    a = stdlib_corpus(max_bytes=200_000, seed=0)
    b = stdlib_corpus(max_bytes=200_000, seed=0)
    c = stdlib_corpus(max_bytes=200_000, seed=1)
    assert a == b
    assert [d.id for d in a] != [d.id for d in c]
    size = sum(len(d.text.encode()) for d in a)
    assert size >= 200_000
    assert size - len(a[-1].text.encode()) < 200_000  # stops at the first file past the budget
    assert all(d.id.endswith(".py") and "site-packages" not in d.id for d in a)
    assert len({d.id.split("/")[0] for d in a}) > 3  # samples across the library
    # The subset's ranking is independent of the split's hash: the split stays near its fraction.
    train, val = split_documents(stdlib_corpus(max_bytes=2_000_000), val_fraction=0.2, seed=0)
    assert 0.1 < len(val) / (len(train) + len(val)) < 0.3


def test_byte_tokenizer_round_trip_and_eos():
    tok = byte_tokenizer()
    text = "déjà vu — ✓"
    assert tok.decode(tok.encode(text)) == text
    assert tok.encode(text) == list(text.encode())
    (ids,) = tokenize_documents([Document("x", text)], tok)
    assert ids[-1] == tok.eos_id and ids.dtype == np.int32
    np.testing.assert_array_equal(ids[:-1], np.frombuffer(text.encode(), np.uint8))


def test_fast_byte_path_matches_the_tokenizer():

    tok = zoo_data.ByteTokenizer(bos=True, eos=True)
    docs = [Document("a", "plain ascii"), Document("b", "ünïcødé ✓ 𝄞")]
    got = tokenize_documents(docs, tok)
    for doc, ids in zip(docs, got, strict=True):
        # BOS first: the tokenizer has one, so its texts start with it (as in generation).
        assert ids.tolist() == tok.encode(doc.text, add_bos=True, add_eos=True)
