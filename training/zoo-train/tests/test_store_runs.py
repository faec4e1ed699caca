"""Runs that read token stores: raw data prepared once into the cache, mixtures with tokens and
held-out losses per source, resume refused on another store, `zoo eval` on raw data and on its
store, pretraining with a BPE tokenizer, and the held-out split of odd corpora."""

from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest
from cli_helpers import WORDS, tiny_tokenizer, write_corpus

import zoo_train
from zoo_train.cli import main
from zoo_train.data import TokenStore, prepare_store

BASE = [
    "--model", "llama-tiny", "--batch-size", "4", "--seq-len", "32", "--no-progress",
    "--sample-tokens", "0", "--set", "model_config.n_layers=1", "--set", "model_config.d_model=32",
    "--set", "model_config.mlp_hidden=64",
]  # fmt: skip


def _records(run: pathlib.Path) -> list[dict]:
    return zoo_train.read_metrics(run / zoo_train.METRICS_FILE)


@pytest.fixture(scope="module")
def corpora(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    """Two raw corpora and their stores."""
    root = tmp_path_factory.mktemp("corpora")
    for name, seed in (("code", 1), ("prose", 2)):
        write_corpus(root / name, files=24, lines=30, seed=seed)
        prepare_store(root / name, root / f"{name}.store", workers=1, progress=False)
    return root


def test_raw_data_is_prepared_once_into_the_cache_and_reused(corpora, tmp_path, capsys):
    args = ["train", *BASE, "--data", str(corpora / "code"), "--out", str(tmp_path / "run")]
    assert main([*args, "--steps", "2", "--eval-every", "0"]) == 0
    cache = tmp_path / ".zoo-data-cache"
    (store,) = cache.iterdir()  # beside the run
    manifest = (store / "manifest.json").stat().st_mtime_ns
    capsys.readouterr()
    assert main([*args, "--steps", "4", "--eval-every", "0"]) == 0  # extends: the same data
    assert [p.name for p in cache.iterdir()] == [store.name]
    assert (store / "manifest.json").stat().st_mtime_ns == manifest  # not prepared again
    assert "resuming from step 2" in capsys.readouterr().err
    # The run's identity is the store's: its fingerprint is what a resume compares.
    assert TokenStore(store).fingerprint in json.dumps(
        zoo_train.load_run(tmp_path / "run").meta["identity"]["data"]
    )


def test_a_mixture_counts_tokens_and_evaluates_per_source(corpora, tmp_path):
    run = tmp_path / "mix"
    code = main([
        "train", *BASE, "--data", str(corpora / "code.store"), str(corpora / "prose.store"),
        "--data-weights", "0.75", "0.25", "--steps", "8", "--log-every", "4",
        "--eval-every", "8", "--out", str(run),
    ])  # fmt: skip
    assert code == 0
    records = _records(run)
    train = [r for r in records if "loss" in r and "event" not in r]
    assert train and all({"tokens/code.store", "tokens/prose.store"} <= set(r) for r in train)
    code_tokens = sum(r["tokens/code.store"] for r in train)
    prose_tokens = sum(r["tokens/prose.store"] for r in train)
    rows = (code_tokens + prose_tokens) / 32
    assert rows == 8 * 4  # every row of every step counted once
    assert abs(code_tokens / 32 - 0.75 * rows) <= 1  # within one row of the weights
    last = [r for r in records if "eval_loss" in r][-1]
    assert {"eval_loss/code.store", "eval_loss/prose.store"} <= set(last)
    both = [last["eval_loss/code.store"], last["eval_loss/prose.store"]]
    assert min(both) <= last["eval_loss"] <= max(both)  # the token-weighted mean of the two


def test_resume_on_another_store_is_refused_in_one_sentence(corpora, tmp_path, capsys):
    run = tmp_path / "run"
    base = ["train", *BASE, "--steps", "4", "--eval-every", "0", "--out", str(run)]
    assert main([*base, "--stop-at", "2", "--data", str(corpora / "code.store")]) == 0
    capsys.readouterr()
    assert main([*base, "--data", str(corpora / "prose.store")]) == 2
    err = capsys.readouterr().err.strip()
    line = err.splitlines()[-1]  # after the parameters line: the refusal, one sentence
    assert line.startswith("zoo train: error: The checkpoints in") and "different run" in line
    # Named by the setting the user changed, not the identity's internal keys.
    assert f"(data: {corpora / 'code.store'} -> {corpora / 'prose.store'});" in line
    assert "data.stores" not in line and "Traceback" not in err


def test_eval_gives_the_same_loss_on_raw_data_and_on_its_store(corpora, tmp_path, capsys):
    run = tmp_path / "run"
    assert main(["train", *BASE, "--steps", "2", "--eval-every", "0", "--out", str(run)]) == 0
    held = tmp_path / "held.jsonl"
    rng = np.random.default_rng()
    held.write_text(
        "".join(json.dumps({"text": " ".join(rng.choice(WORDS, 30))}) + "\n" for _ in range(9))
    )
    prepare_store(held, tmp_path / "held.store", workers=1, eval_fraction=0.0, progress=False)
    losses = []
    for data in (held, tmp_path / "held.store"):
        capsys.readouterr()
        args = ["eval", str(run), "--data", str(data), "--seq-len", "32", "--json"]
        assert main(args) == 0
        losses.append(json.loads(capsys.readouterr().out.strip().splitlines()[-1]))
    assert losses[0] == losses[1] and losses[0]["tokens"] > 0


def test_pretraining_with_a_bpe_tokenizer_rounds_the_vocabulary_and_keeps_the_tokenizer(
    corpora, tmp_path, capsys
):
    tok = tiny_tokenizer(tmp_path / "tok", vocab_size=200)
    run = tmp_path / "run"
    args = ["train", *BASE, "--data", str(corpora / "code"), "--tokenizer", str(tok)]
    assert main([*args, "--steps", "2", "--eval-every", "0", "--out", str(run)]) == 0
    err = capsys.readouterr().err
    loaded = zoo_train.load_run(run)
    ids = loaded.tokenizer.vocab_size  # the BPE one, not bytes: the tokenizer travels along
    assert ids != 257 and loaded.model.config.vocab_size == -(-ids // 128) * 128
    assert f"the tokenizer's {ids:,} ids rounded up to a multiple of 128" in err
    assert loaded.tokenizer.encode("alpha beta") == TokenStore(
        next((tmp_path / ".zoo-data-cache").iterdir())
    ).tokenizer().encode("alpha beta")
    assert main(["generate", str(run), "--prompt", "def", "--max-new-tokens", "3"]) == 0
    # A store of another tokenizer is refused, naming both.
    capsys.readouterr()
    store = ["--data", str(corpora / "code.store"), "--out", str(tmp_path / "other")]
    assert main([*args[: args.index("--data")], *store, "--tokenizer", str(tok)]) == 2
    err = capsys.readouterr().err
    assert "was made with the byte tokenizer" in err and "with --tokenizer" in err


def test_training_from_a_store_takes_its_tokenizer_when_none_is_named(tmp_path, capsys):
    # `zoo data prepare corpus/ --out store --tokenizer ./tok` then `zoo train --data store/`:
    # the store holds a copy of its tokenizer, and the run trains (and keeps) that one.
    tok = tiny_tokenizer(tmp_path / "tok", vocab_size=200)
    write_corpus(tmp_path / "corpus", files=6, lines=20, seed=3)
    store = tmp_path / "store"
    prepare_store(tmp_path / "corpus", store, tokenizer=tok, workers=1, progress=False)
    run = tmp_path / "run"
    args = ["train", *BASE, "--data", str(store), "--steps", "1", "--eval-every", "0"]
    assert main([*args, "--out", str(run)]) == 0
    err = capsys.readouterr().err
    assert f"zoo: tokenizer: the store's own (the tokenizer at {tok}, copied in {store}" in err
    loaded = zoo_train.load_run(run)
    own = TokenStore(store).tokenizer()
    assert loaded.tokenizer.vocab_size == own.vocab_size != 257
    assert loaded.tokenizer.encode("alpha beta gamma") == own.encode("alpha beta gamma")


def _held_out_name(fraction: float, pattern: str, id_suffix: str = "") -> str:
    """A file name (``pattern`` with a number) whose first document the hash holds out: its
    id is the name itself inside a directory, ``name:1`` for a JSON lines file's first line."""
    from zoo_data._split import held_out

    names = (pattern.format(i) for i in range(10_000))
    return next(n for n in names if held_out(n + id_suffix, fraction))


def test_a_large_document_the_hash_holds_out_trains_instead(tmp_path):
    # Enough files to hold out by file: the split never holds out more than its share of the
    # tokens, even when the hash picks a file larger than the rest together.
    data = tmp_path / "data"
    data.mkdir()
    (data / _held_out_name(0.05, "big{}.txt")).write_text("alpha beta gamma\n" * 20_000)
    for i in range(60):
        (data / f"small{i}.txt").write_text(f"delta {i} epsilon\n" * 40)
    info = prepare_store(data, tmp_path / "s", workers=1, progress=False)
    splits = info["splits"]
    total = splits["eval"]["tokens"] + splits["train"]["tokens"]
    assert 0 < splits["eval"]["tokens"] <= 0.05 * total  # small files only
    assert splits["eval"]["tokens"] < 0.01 * total
    # The audit's case: two documents (records, which are not split by lines), the hash picking
    # the large one; it held out that one, 99.85% of the data.
    pair = tmp_path / _held_out_name(0.05, "pair{}.jsonl", ":1")
    records = [{"text": "alpha beta gamma\n" * 2_000}, {"text": "delta epsilon\n" * 20}]
    pair.write_text("".join(json.dumps(r) + "\n" for r in records))
    splits = prepare_store(pair, tmp_path / "s2", workers=1, progress=False)["splits"]
    held, total = splits["eval"]["tokens"], splits["eval"]["tokens"] + splits["train"]["tokens"]
    assert held <= 0.05 * total


def test_a_corpus_of_too_few_files_holds_out_whole_files_within_the_share(tmp_path, caplog):
    rng = np.random.default_rng()
    # One file: holding any of it out would cut it, so nothing is held out, and that is said.
    one = tmp_path / "one.txt"
    one.write_text("".join(f"line {i} {' '.join(rng.choice(WORDS, 4))}\n" for i in range(400)))
    info = prepare_store(one, tmp_path / "s1", workers=1, progress=False)
    assert info["splits"]["eval"]["documents"] == 0 and info["documents"] == 1
    assert "none was held out" in caplog.text and "a document is never cut" in caplog.text
    # Few files (fewer than 2 / 0.05): whole files are held out, within 5% of the bytes.
    files = tmp_path / "few"
    files.mkdir()
    texts = {}
    for i in range(int(rng.integers(5, 15))):
        words = int(rng.integers(2, 400)) if i % 2 else int(rng.integers(2_000, 4_000))
        texts[f"f{i}.txt"] = " ".join(rng.choice(WORDS, words)) + "\n"
        (files / f"f{i}.txt").write_text(texts[f"f{i}.txt"])
    caplog.clear()
    prepare_store(files, tmp_path / "s2", workers=1, progress=False)
    held = TokenStore(tmp_path / "s2").split("eval")
    got = [held.document(i)[0] for i in range(held.num_documents)]
    got = [bytes(doc[:-1].astype(np.uint8)).decode() for doc in got]  # less the EOS
    assert held.num_documents > 0 and set(got) <= set(texts.values())  # whole files only
    total = sum(len(t.encode()) for t in texts.values())
    assert sum(len(t.encode()) for t in got) <= 0.05 * total
    assert f"held out {held.num_documents} whole" in caplog.text


def test_a_stores_eval_equals_the_raw_texts_eval_with_the_default_split(corpora, tmp_path, capsys):
    run = tmp_path / "run"
    data = ["--data", str(corpora / "code.store")]
    assert (
        main(["train", *BASE, *data, "--steps", "2", "--eval-every", "0", "--out", str(run)]) == 0
    )
    rng = np.random.default_rng()
    text = tmp_path / "one.txt"
    text.write_text("".join(" ".join(rng.choice(WORDS, 12)) + "\n" for _ in range(300)))
    prepare_store(text, tmp_path / "one.store", workers=1, progress=False)  # the default split
    losses = []
    for source in (text, tmp_path / "one.store"):
        capsys.readouterr()
        args = ["eval", str(run), "--data", str(source), "--seq-len", "32", "--json"]
        assert main(args) == 0
        losses.append(json.loads(capsys.readouterr().out.strip().splitlines()[-1]))
    assert losses[0]["tokens"] == losses[1]["tokens"] > 0
    np.testing.assert_allclose(losses[0]["loss"], losses[1]["loss"], rtol=2e-7)
