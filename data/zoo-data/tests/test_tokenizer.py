"""Tokenizers: byte-level round trips and a locally trained ``tokenizer.json``."""

from __future__ import annotations

import json
import random

import pytest
import tokenizers
from tokenizers import decoders, models, pre_tokenizers, trainers

import zoo_data

TEXTS = ["hello world", "héllo wörld", "你好，世界", "emoji 🦒🦓 and tabs\t\nnewlines", ""]


def _random_text(rng: random.Random, n: int) -> str:
    # Code points from several planes, skipping the surrogate range (not encodable as UTF-8).
    chars = []
    for _ in range(n):
        cp = rng.choice(
            [rng.randrange(32, 127), rng.randrange(0xA0, 0xD7FF), rng.randrange(0x10000, 0x10FFFF)]
        )
        chars.append(chr(cp))
    return "".join(chars)


@pytest.mark.parametrize(
    ("bos", "eos"), [(True, True), (False, False), (True, False), (False, True)]
)
def test_byte_tokenizer_round_trip(bos: bool, eos: bool) -> None:
    tok = zoo_data.ByteTokenizer(bos=bos, eos=eos)
    assert tok.vocab_size == 256 + bos + eos
    rng = random.Random(0)
    for text in [*TEXTS, *(_random_text(rng, 40) for _ in range(20))]:
        ids = tok.encode(text, add_bos=bos, add_eos=eos)
        assert ids[bos : len(ids) - eos] == list(text.encode("utf-8"))
        if bos:
            assert ids[0] == tok.bos_id
        if eos:
            assert ids[-1] == tok.eos_id
        assert all(0 <= i < tok.vocab_size for i in ids)
        assert tok.decode(ids) == text


def test_byte_tokenizer_specials_and_errors() -> None:
    tok = zoo_data.ByteTokenizer()
    assert (tok.bos_id, tok.eos_id) == (256, 257)
    ids = tok.encode("ab", add_bos=True, add_eos=True)
    assert tok.decode(ids, skip_special=False) == "<s>ab</s>"
    with pytest.raises(ValueError, match="outside"):
        tok.decode([300])
    with pytest.raises(ValueError, match="BOS"):
        zoo_data.ByteTokenizer(bos=False).encode("a", add_bos=True)
    # A cut multi-byte character decodes to the replacement character, not an exception.
    assert tok.decode(list("é".encode())[:1]) == "\ufffd"


def _train_bpe(path) -> tokenizers.Tokenizer:
    tok = tokenizers.Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=300,
        special_tokens=["<s>", "</s>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator([*TEXTS, "the quick brown fox jumps over the lazy dog"] * 3, trainer)
    tok.save(str(path / "tokenizer.json"))
    return tok


def test_load_tokenizer_json(tmp_path) -> None:
    reference = _train_bpe(tmp_path)
    (tmp_path / "tokenizer_config.json").write_text(
        json.dumps({"bos_token": "<s>", "eos_token": {"content": "</s>", "special": True}})
    )
    tok = zoo_data.load_tokenizer(tmp_path)
    assert isinstance(tok, zoo_data.HFTokenizer)
    assert tok.vocab_size == reference.get_vocab_size()
    assert (tok.bos_id, tok.eos_id) == (reference.token_to_id("<s>"), reference.token_to_id("</s>"))
    rng = random.Random(1)
    for text in [*TEXTS, "the lazy fox", *(_random_text(rng, 20) for _ in range(10))]:
        ids = tok.encode(text, add_bos=True, add_eos=True)
        inner = reference.encode(text, add_special_tokens=False).ids
        assert ids == [tok.bos_id, *inner, tok.eos_id]
        assert tok.decode(ids) == text
    # Merges learned from the corpus make common words shorter than their bytes.
    assert len(tok.encode("the quick brown fox")) < len(b"the quick brown fox")
    # The file itself is accepted too.
    assert zoo_data.load_tokenizer(tmp_path / "tokenizer.json").encode("fox") == tok.encode("fox")


def test_load_tokenizer_falls_back_to_bytes(tmp_path) -> None:
    tok = zoo_data.load_tokenizer(tmp_path)
    assert isinstance(tok, zoo_data.ByteTokenizer)
    assert tok.decode(tok.encode("ü")) == "ü"
    with pytest.raises(ValueError, match="does not exist"):
        zoo_data.load_tokenizer(tmp_path / "nope")


@pytest.mark.parametrize("bos", [True, False])
def test_byte_tokenizer_saves_a_tokenizer_json_transformers_reads(tmp_path, bos: bool) -> None:
    from transformers import AutoTokenizer

    tok = zoo_data.ByteTokenizer(bos=bos, eos=True)
    tok.save(tmp_path)
    theirs = AutoTokenizer.from_pretrained(tmp_path)
    reloaded = zoo_data.load_tokenizer(tmp_path)
    assert (reloaded.bos_id, reloaded.eos_id, reloaded.add_bos) == (tok.bos_id, tok.eos_id, bos)
    for text in [*TEXTS, "tab\there \x00 nul"]:
        want = tok.encode(text, add_bos=bos)
        assert theirs(text)["input_ids"] == want == reloaded.encode(text, add_bos=reloaded.add_bos)
        assert theirs.decode(want, skip_special_tokens=True) == text


@pytest.mark.parametrize("post_processor_bos", [True, False])
@pytest.mark.parametrize("add_bos_token", [True, False, None])
@pytest.mark.parametrize("tokenizer_class", ["LlamaTokenizer", "PreTrainedTokenizerFast"])
def test_bos_is_what_transformers_puts_first(
    tmp_path, post_processor_bos: bool, add_bos_token: bool | None, tokenizer_class: str
) -> None:
    # tokenizer_config.json's add_bos_token may disagree with the tokenizer.json post-processor;
    # transformers encodes by the post-processor then, and so must every zoo text.
    from tokenizers import processors
    from transformers import AutoTokenizer

    tok = _train_bpe(tmp_path)
    if post_processor_bos:
        tok.post_processor = processors.TemplateProcessing(
            single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", tok.token_to_id("<s>"))]
        )
    tok.save(str(tmp_path / "tokenizer.json"))
    config = {"tokenizer_class": tokenizer_class, "bos_token": "<s>", "eos_token": "</s>"}
    if add_bos_token is not None:
        config["add_bos_token"] = add_bos_token
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(config))
    ours = zoo_data.load_tokenizer(tmp_path)
    theirs = AutoTokenizer.from_pretrained(tmp_path)
    for text in [_random_text(random.Random(seed), 8) for seed in range(3)]:
        assert ours.encode(text, add_bos=ours.add_bos) == theirs(text)["input_ids"]


@pytest.mark.parametrize(
    ("name", "content", "said"),
    [
        ("tokenizer.json", b"{ not json", "is not a readable tokenizer.json"),
        ("tokenizer.json", b"", "is not a readable tokenizer.json"),
        ("tokenizer_config.json", b"{'bos_token': 1}", "is not readable JSON"),
        ("tokenizer_config.json", b'{"bos_token": "\xff"}', "is not readable JSON"),
        ("tokenizer_config.json", b"[1, 2]", "holds a JSON list"),
        ("chat_template.jinja", b"{{ \xff }}", "is not a readable UTF-8 template"),
    ],
)
def test_a_damaged_tokenizer_file_is_named(tmp_path, name, content, said) -> None:
    zoo_data.ByteTokenizer().save(tmp_path)
    (tmp_path / name).write_bytes(content)
    with pytest.raises(ValueError, match=said) as raised:
        zoo_data.load_tokenizer(tmp_path)
    assert str(raised.value).startswith(f"{tmp_path / name} ") and said in str(raised.value)
