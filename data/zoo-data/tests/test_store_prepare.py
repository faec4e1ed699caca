"""Preparing token stores: tokens equal to the tokenizer's own, from every input format; the same
bytes whatever the number of workers, after an interruption, and on a rerun; bad inputs."""

from __future__ import annotations

import filecmp
import gzip
import json
import os
import pathlib

import numpy as np
import pytest
import tokenizers
import zstandard
from store_helpers import FORMATS, random_texts, write_format

import zoo_data
from zoo_data import Document, TokenStore, prepare_store, store_info, tokenize_examples
from zoo_data.cli import main
from zoo_data.store import _prepare
from zoo_data.testing import tiny_tokenizer


@pytest.fixture(scope="module")
def tok_dir(tmp_path_factory) -> pathlib.Path:
    return tiny_tokenizer(tmp_path_factory.mktemp("tok"))  # BPE, BOS added by its post-processor


def _documents(store: TokenStore, split: str = "train") -> list[list[int]]:
    part = store.split(split)
    return [part.document(i)[0].tolist() for i in range(part.num_documents)]


def _same_tree(a: pathlib.Path, b: pathlib.Path) -> None:
    files_a = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file())
    files_b = sorted(p.relative_to(b) for p in b.rglob("*") if p.is_file())
    assert files_a == files_b
    for rel in files_a:
        assert filecmp.cmp(a / rel, b / rel, shallow=False), rel


@pytest.mark.parametrize("fmt", FORMATS)
def test_tokens_equal_the_tokenizers_own_for_every_format(tmp_path, tok_dir, fmt):
    texts = random_texts(23, seed=FORMATS.index(fmt))
    source = write_format(tmp_path / "in", fmt, texts)
    prepare_store([source], tmp_path / "s", tokenizer=tok_dir, eval_fraction=0, progress=False)
    # The reference: `tokenizers` itself, its post-processor adding BOS, then EOS (id 2).
    ref = tokenizers.Tokenizer.from_file(str(tok_dir / "tokenizer.json"))
    want = [[*ref.encode(t).ids, 2] for t in texts]
    assert want[0][0] == 1  # BOS leads
    got = _documents(TokenStore(tmp_path / "s"))
    assert got == want


def test_byte_tokenizer_and_long_texts_cut_into_pieces(tmp_path, monkeypatch):
    from zoo_data.inputs import _read, _text

    monkeypatch.setattr(_text, "PIECE_CHARS", 64)
    monkeypatch.setattr(_read, "_SMALL", 100)  # the streaming reader, not the whole-file one
    text = "".join(random_texts(40, seed=3, max_len=30))
    (tmp_path / "big.txt").write_text(text, encoding="utf-8")
    prepare_store([tmp_path / "big.txt"], tmp_path / "s", eval_fraction=0, progress=False)
    docs = _documents(TokenStore(tmp_path / "s"))
    assert len(docs) > 3 and all(d[-1] == 256 for d in docs)  # EOS after every piece
    assert all(len(bytes(d[:-1]).decode()) <= 64 for d in docs)
    assert b"".join(bytes(d[:-1]) for d in docs) == text.encode()


def test_chat_and_prompt_completion_masks_survive_the_store(tmp_path, tok_dir):
    records = [
        {
            "messages": [
                {"role": "user", "content": f"what is {i}?"},
                {"role": "assistant", "content": "beta " * i},
            ]
        }
        for i in range(1, 6)
    ] + [{"prompt": "Q: 1+2?", "completion": " 3"}, {"text": "plain alpha"}]
    (tmp_path / "chat.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    prepare_store(
        [tmp_path / "chat.jsonl"],
        tmp_path / "s",
        tokenizer=tok_dir,
        eval_fraction=0,
        progress=False,
    )
    store = TokenStore(tmp_path / "s")
    part = store.split("train")
    # Today's path (tokenize_examples) is the reference for ids and loss weights.
    tok = zoo_data.load_tokenizer(tok_dir)
    docs = [
        Document(
            "x",
            "",
            (("user", r["messages"][0]["content"]), ("assistant", r["messages"][1]["content"])),
        )
        if "messages" in r
        else Document("x", "", (("prompt", r["prompt"]), ("completion", r["completion"])))
        if "prompt" in r
        else Document("x", r["text"])
        for r in records
    ]
    ids, weights = tokenize_examples(docs, tok)
    mask = np.concatenate([part.document(i)[1] for i in range(part.num_documents)])
    assert _documents(store) == [i.tolist() for i in ids]
    np.testing.assert_array_equal(mask, np.concatenate(weights).astype(np.uint8))
    assert store_info(tmp_path / "s")["examples"] == 6


def _small_shards(monkeypatch) -> None:
    monkeypatch.setattr(_prepare, "CHUNK_CHARS", 400)
    monkeypatch.setattr(_prepare, "SHARD_CHARS", 1500)


def test_workers_give_byte_identical_stores(tmp_path, tok_dir, monkeypatch):
    _small_shards(monkeypatch)
    source = write_format(tmp_path / "in", "text", random_texts(60, seed=5))
    one = prepare_store([source], tmp_path / "w1", tokenizer=tok_dir, workers=1, progress=False)
    two = prepare_store([source], tmp_path / "w2", tokenizer=tok_dir, workers=2, progress=False)
    assert one["shards"] > 6 and one["splits"]["eval"]["documents"] > 0
    _same_tree(tmp_path / "w1", tmp_path / "w2")
    assert one["fingerprint"] == two["fingerprint"]


def test_an_interrupted_prepare_resumes_to_the_same_store(tmp_path, tok_dir, monkeypatch):
    _small_shards(monkeypatch)
    source = write_format(tmp_path / "in", "jsonl", random_texts(60, seed=6))
    prepare_store([source], tmp_path / "fresh", tokenizer=tok_dir, workers=1, progress=False)
    close = _prepare._Run.close
    calls = []

    def interrupted(self):
        close(self)
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt

    monkeypatch.setattr(_prepare._Run, "close", interrupted)
    with pytest.raises(KeyboardInterrupt):
        prepare_store([source], tmp_path / "s", tokenizer=tok_dir, workers=2, progress=False)
    assert not (tmp_path / "s").exists()  # nothing published
    progress = json.loads((tmp_path / ".s.partial" / "progress.json").read_text())
    assert len(progress["groups"]) == 3
    monkeypatch.setattr(_prepare._Run, "close", close)
    encoded = []
    monkeypatch.setattr(_prepare.Encoder, "__call__", _counting(_prepare.Encoder.__call__, encoded))
    result = prepare_store([source], tmp_path / "s", tokenizer=tok_dir, workers=1, progress=False)
    assert result["status"] == "resumed"
    assert sum(encoded) < 60  # the finished shards were not tokenized again
    _same_tree(tmp_path / "fresh", tmp_path / "s")
    assert not (tmp_path / ".s.partial").exists()


def _counting(call, counts):
    def wrapped(self, docs):
        counts.append(len(docs))
        return call(self, docs)

    return wrapped


def test_rerun_is_up_to_date_and_other_settings_are_refused(tmp_path, tok_dir):
    source = write_format(tmp_path / "in", "text", random_texts(5, seed=7))
    first = prepare_store([source], tmp_path / "s", progress=False)
    assert first["status"] == "prepared"
    assert prepare_store([source], tmp_path / "s", progress=False)["status"] == "up to date"
    with pytest.raises(ValueError, match=r"other tokenizer.*--overwrite"):
        prepare_store([source], tmp_path / "s", tokenizer=tok_dir, progress=False)
    with pytest.raises(ValueError, match="other eval_fraction"):
        prepare_store([source], tmp_path / "s", eval_fraction=0.5, progress=False)
    (source / "doc0000.txt").write_text("changed")
    with pytest.raises(ValueError, match="other inputs"):
        prepare_store([source], tmp_path / "s", progress=False)
    again = prepare_store(
        [source], tmp_path / "s", tokenizer=tok_dir, overwrite=True, progress=False
    )
    assert again["status"] == "prepared" and again["tokenizer"]["vocab_size"] != 257
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "keep.txt").write_text("mine")
    with pytest.raises(ValueError, match="not a token store"):
        prepare_store([source], tmp_path / "other", progress=False)


def test_bad_inputs_are_one_sentence(tmp_path):
    binary = tmp_path / "bin"
    binary.mkdir()
    (binary / "a.dat").write_bytes(b"\x00\x01\x02")
    (binary / "b.txt").write_bytes(b"\xff\xfe bad utf-8")
    with pytest.raises(
        ValueError, match=r"'.*bin' has no readable documents: its 2 binary or non-UTF-8"
    ):
        prepare_store([binary], tmp_path / "s", progress=False)
    for name in ("notes.json", "data.zip"):
        (tmp_path / name).write_text("{}")
        with pytest.raises(ValueError, match="not a format zoo reads"):
            prepare_store([tmp_path / name], tmp_path / "s", progress=False)
    with pytest.raises(ValueError, match="binary or non-UTF-8 file; pass text"):
        prepare_store([binary / "a.dat"], tmp_path / "s", progress=False)
    (tmp_path / "bad.jsonl").write_text('{"text": "ok"}\n{"body": 1}\n')
    with pytest.raises(ValueError, match=r"bad.jsonl:2 has no string field 'text'"):
        prepare_store([tmp_path / "bad.jsonl"], tmp_path / "s", progress=False)


def test_what_is_not_utf8_is_skipped_alike_in_text_and_json_lines_and_said(tmp_path, caplog):
    data = tmp_path / "data"
    data.mkdir()
    (data / "a.txt").write_text("alpha")
    (data / "latin1.txt").write_bytes("caf\u00e9".encode("latin-1"))
    lines = [b'{"text": "beta"}\n', b'{"text": "caf\xe9"}\n', b'{"text": "gamma"}\n']
    lines.append(b'{"text": "\xff\xfe"}\n')
    # Two zstd frames, as concatenating or parallel compressors write: the second is read too.
    zstd = zstandard.ZstdCompressor()
    (data / "d.jsonl.zst").write_bytes(
        zstd.compress(b"".join(lines[:2])) + zstd.compress(b"".join(lines[2:]))
    )
    with caplog.at_level("WARNING", logger="zoo_data"):
        prepare_store(data, tmp_path / "s", eval_fraction=0, workers=1, progress=False)
    docs = sorted(bytes(d[:-1]).decode() for d in _documents(TokenStore(tmp_path / "s")))
    assert docs == ["alpha", "beta", "gamma"]  # neither file nor line turned into mojibake
    assert [r.getMessage() for r in caplog.records] == [
        f"skipped 2 line(s) of {data / 'd.jsonl.zst'} that are not valid UTF-8 (the first: "
        "line 2); re-encode them as UTF-8 to train on them",
        f"skipped 1 binary or non-UTF-8 file(s) in the data (e.g. {data / 'latin1.txt'})",
    ]
    (tmp_path / "bad.jsonl").write_bytes(b"".join(lines[1::2]))
    with pytest.raises(
        ValueError, match=r"no readable documents: its lines are not valid UTF-8 \(e"
    ):
        prepare_store(tmp_path / "bad.jsonl", tmp_path / "s2", progress=False)


def test_files_that_cannot_be_read_are_one_sentence_and_leave_nothing(tmp_path, monkeypatch):
    data = tmp_path / "data"
    (data / "locked").mkdir(parents=True)
    (data / "a.txt").write_text("alpha")
    (data / "locked" / "b.txt").write_text("beta")
    lines = b"".join(b'{"text": "line %d"}\n' % i for i in range(3000))
    (tmp_path / "cut.jsonl.gz").write_bytes(gzip.compress(lines)[:-30])
    (tmp_path / "cut.jsonl.zst").write_bytes(zstandard.ZstdCompressor().compress(lines)[:-30])
    (tmp_path / "not.txt.zst").write_bytes(b"hello, not zstd")
    os.mkfifo(tmp_path / "fifo")
    cases = [
        ("cut.jsonl.gz", "'cut.jsonl.gz': compressed file ended before the end-of-stream"),
        ("cut.jsonl.zst", "'cut.jsonl.zst': the zstd file ends inside a frame (truncated)"),
        ("not.txt.zst", "'not.txt.zst': not valid zstd data"),
        ("fifo", "'fifo' is a FIFO (named pipe), not a file; pass a regular file"),
    ]
    out = tmp_path / "new" / "s"
    monkeypatch.chdir(tmp_path)
    for name, said in cases:
        with pytest.raises(ValueError, match=r"^(Cannot read the data file|The data source)") as e:
            prepare_store(name, out, progress=False)
        assert said in str(e.value)
        assert not (tmp_path / "new").exists()  # no partial store, nor the directory made for it
    # A directory that cannot be listed (no permission: root may read anything, so pretended).
    scandir = os.scandir

    def refuse(path):
        if pathlib.Path(path).name == "locked":
            raise PermissionError(13, "Permission denied", str(path))
        return scandir(path)

    monkeypatch.setattr(os, "scandir", refuse)
    with pytest.raises(ValueError, match=r"Cannot read the data directory '.*locked': permission"):
        prepare_store(data, out, progress=False)  # its files were left out unsaid


def test_each_file_is_read_once_through_symlink_loops_and_datasets_metadata_is_not_text(tmp_path):
    tree = tmp_path / "tree"
    (tree / "sub").mkdir(parents=True)
    (tree / "a.txt").write_text("alpha")
    (tree / "sub" / "b.txt").write_text("beta")
    os.symlink(tree, tree / "sub" / "loop")  # a loop back to the top
    os.symlink(tree / "a.txt", tree / "again.txt")
    write_format(tree, "datasets", ["gamma", "delta"])
    result = prepare_store([f"{tree}/**", tree], tmp_path / "s", eval_fraction=0, progress=False)
    docs = sorted(bytes(d[:-1]).decode() for d in _documents(TokenStore(tmp_path / "s")))
    assert docs == ["alpha", "beta", "delta", "gamma"]
    assert result["documents"] == 4


def test_cli_prepare_and_info(tmp_path, capsys):
    source = write_format(tmp_path / "in", "text", random_texts(8, seed=9))
    out = tmp_path / "s"
    # Nothing held out: eight files are too few to hold out by file, and would be split by lines.
    prepare = ["prepare", str(source), "--out", str(out), "--eval-fraction", "0"]
    assert main([*prepare, "--no-progress", "--workers", "1"]) == 0
    assert "prepared: 8 documents" in capsys.readouterr().out
    assert main([*prepare, "--no-progress"]) == 0
    assert "is up to date" in capsys.readouterr().out
    assert main(["info", str(out), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["documents"] == 8 and summary["tokenizer"]["description"] == "the byte tokenizer"
    assert main(["info", str(out)]) == 0
    assert "train" in capsys.readouterr().out
    for argv in (
        ["prepare", str(tmp_path / "missing"), "--out", str(out)],
        ["prepare", str(source), "--out", str(out), "--eval-fraction", "1.5"],
        ["prepare", str(source), "--out", str(out), "--tokenizer", str(tmp_path)],
        ["info", str(source)],
    ):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "Traceback" not in err, err
        assert err.startswith(f"zoo-data {argv[0]}: error: "), err
    with pytest.raises(SystemExit) as exit_:
        main(["prepare", str(source)])  # no --out: argparse's own one line
    assert exit_.value.code == 2 and capsys.readouterr().err.count("\n") == 1
