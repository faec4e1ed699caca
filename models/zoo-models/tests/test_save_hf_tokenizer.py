"""A checkpoint saved with its tokenizer loads it back (the tokenizers themselves are zoo-data's,
tested there)."""

from __future__ import annotations

import json

import jax

import zoo_models
from zoo_data.testing import tiny_tokenizer


def test_save_hf_writes_the_tokenizer(tmp_path) -> None:
    tiny_tokenizer(tmp_path / "src", add_bos=False)
    (tmp_path / "src" / "tokenizer_config.json").write_text(json.dumps({"eos_token": "</s>"}))
    tok = zoo_models.load_tokenizer(tmp_path / "src")
    # The tiny tokenizer's vocabulary is smaller than gpt2-tiny's special ids: keep the model's.
    assert tok.vocab_size <= zoo_models.get("gpt2-tiny").vocab_size
    model = zoo_models.build(zoo_models.get("gpt2-tiny"), key=jax.random.key(0))
    zoo_models.save_hf(model, tmp_path / "ckpt", tokenizer=tok)
    again = zoo_models.load_tokenizer(tmp_path / "ckpt")
    assert isinstance(again, zoo_models.HFTokenizer)
    assert (again.bos_id, again.eos_id) == (None, tok.eos_id)
    text = "the quick brown alpha beta"
    assert again.encode(text, add_eos=True) == tok.encode(text, add_eos=True)
