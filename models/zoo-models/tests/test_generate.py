"""Cached generation against repeated full forward passes, sampling and stop tokens."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import zoo_models

PROMPT, NEW = 5, 14  # 19 tokens in all: beyond the tiny presets' sliding window of 8


@pytest.fixture(scope="module")
def llama() -> zoo_models.Transformer:
    return zoo_models.build(zoo_models.get("llama-tiny"), key=jax.random.key(0))


def _prompt(seed: int, vocab: int, batch: int = 3) -> jax.Array:
    return jnp.asarray(
        np.random.default_rng(seed).integers(0, vocab, size=(batch, PROMPT)), jnp.int32
    )


def _greedy_reference(
    model: zoo_models.Transformer, prompt: jax.Array, new: int, length: int | None = None
) -> np.ndarray:
    """Greedy decoding by full forward passes without a cache.

    The sequence lives in a fixed-size buffer: causality makes the logits at position t
    independent of the (not yet written) tokens after it, so one compiled forward serves
    every step (and ``length`` lets prompts of several lengths share it).
    """
    forward = eqx.filter_jit(lambda m, ids: m(ids))
    batch, t0 = prompt.shape
    ids = np.zeros((batch, length or t0 + new), np.int32)
    ids[:, :t0] = np.asarray(prompt)
    for t in range(t0, t0 + new):
        logits = np.asarray(forward(model, jnp.asarray(ids)))
        ids[:, t] = logits[:, t - 1].argmax(-1)
    return ids[:, : t0 + new]


@pytest.mark.parametrize("name", ["gpt2-tiny", "gemma2-tiny"])
def test_greedy_matches_full_forward(name: str) -> None:
    model = zoo_models.build(zoo_models.get(name), key=jax.random.key(1))
    prompt = _prompt(2, model.config.vocab_size)
    got = np.asarray(zoo_models.generate(model, prompt, max_new_tokens=NEW, greedy=True))
    assert got.shape == (3, PROMPT + NEW) and got.dtype == np.int32
    np.testing.assert_array_equal(got, _greedy_reference(model, prompt, NEW))


def test_sampling_is_reproducible_and_keys_differ(llama) -> None:
    prompt = _prompt(3, llama.config.vocab_size)
    kw = dict(max_new_tokens=NEW, temperature=1.5)
    a = np.asarray(zoo_models.generate(llama, prompt, key=jax.random.key(7), **kw))
    b = np.asarray(zoo_models.generate(llama, prompt, key=jax.random.key(7), **kw))
    c = np.asarray(zoo_models.generate(llama, prompt, key=jax.random.key(8), **kw))
    np.testing.assert_array_equal(a, b)
    assert (a[:, PROMPT:] != c[:, PROMPT:]).mean() > 0.5  # near-uniform logits: most draws differ
    np.testing.assert_array_equal(a[:, :PROMPT], np.asarray(prompt))
    assert a.min() >= 0 and a.max() < llama.config.vocab_size
    greedy = np.asarray(zoo_models.generate(llama, prompt, max_new_tokens=NEW, greedy=True))
    assert (a != greedy).any()


def test_top_k_one_and_tiny_top_p_equal_greedy(llama) -> None:
    prompt = _prompt(4, llama.config.vocab_size)
    greedy = np.asarray(zoo_models.generate(llama, prompt, max_new_tokens=NEW, greedy=True))
    top1 = zoo_models.generate(llama, prompt, max_new_tokens=NEW, key=jax.random.key(0), top_k=1)
    np.testing.assert_array_equal(np.asarray(top1), greedy)
    # A nucleus of mass 1e-6 holds only the most likely token.
    config = zoo_models.GenerationConfig(max_new_tokens=NEW, top_p=1e-6, temperature=0.5)
    nucleus = zoo_models.generate(llama, prompt, key=jax.random.key(1), config=config)
    np.testing.assert_array_equal(np.asarray(nucleus), greedy)


def test_stop_tokens_end_rows(llama) -> None:
    prompt = _prompt(5, llama.config.vocab_size, batch=4)
    greedy = np.asarray(zoo_models.generate(llama, prompt, max_new_tokens=NEW, greedy=True))
    stop = int(greedy[0, PROMPT + 3])
    pad = llama.config.vocab_size - 1
    got = np.asarray(
        zoo_models.generate(
            llama, prompt, max_new_tokens=NEW, greedy=True, stop_tokens=(stop,), pad_id=pad
        )
    )
    # Reference: each greedy row cut after its first stop token, the rest padding.
    want = greedy.copy()
    for row in want:
        hits = np.flatnonzero(row[PROMPT:] == stop)
        if hits.size:
            row[PROMPT + hits[0] + 1 :] = pad
    np.testing.assert_array_equal(got, want)
    assert (got[0, PROMPT + 4 :] == pad).all()
    # When every row stops, the loop ends early and the rest is padding.
    first = [int(t) for t in greedy[:, PROMPT]]
    done = np.asarray(
        zoo_models.generate(llama, prompt, max_new_tokens=NEW, greedy=True, stop_tokens=first)
    )
    np.testing.assert_array_equal(done[:, : PROMPT + 1], greedy[:, : PROMPT + 1])
    assert (done[:, PROMPT + 1 :] == first[0]).all()  # pad_id defaults to the first stop token


def test_generation_errors(llama) -> None:
    prompt = _prompt(6, llama.config.vocab_size)
    with pytest.raises(ValueError, match="key"):
        zoo_models.generate(llama, prompt, max_new_tokens=3)
    with pytest.raises(ValueError, match="max_new_tokens"):
        zoo_models.generate(llama, prompt, max_new_tokens=0, greedy=True)
    with pytest.raises(ValueError, match="top_p"):
        zoo_models.GenerationConfig(max_new_tokens=2, top_p=0.0)
    with pytest.raises(ValueError, match="prompt_ids"):
        zoo_models.generate(llama, prompt[0], max_new_tokens=2, greedy=True)
    with pytest.raises(ValueError, match="lie in"):
        zoo_models.generate(llama, prompt + llama.config.vocab_size, max_new_tokens=2, greedy=True)
    gpt2 = zoo_models.build(zoo_models.get("gpt2-tiny"), key=jax.random.key(0))
    with pytest.raises(ValueError, match="learned positions"):
        zoo_models.generate(gpt2, prompt, max_new_tokens=gpt2.config.max_position, greedy=True)
    with pytest.raises(ValueError, match="not both"):
        zoo_models.generate(
            llama, prompt, max_new_tokens=2, config=zoo_models.GenerationConfig(max_new_tokens=2)
        )


def test_left_padded_rows_continue_as_alone(llama) -> None:
    rng = np.random.default_rng(9)
    vocab = llama.config.vocab_size
    rows = [rng.integers(0, vocab, size=n).tolist() for n in (2, PROMPT, 4)]
    ids, mask = zoo_models.left_pad(rows, pad_id=vocab - 1)
    assert ids.shape == (3, PROMPT)
    got = np.asarray(
        zoo_models.generate(llama, ids, prompt_mask=mask, max_new_tokens=NEW, greedy=True)
    )
    np.testing.assert_array_equal(got[:, :PROMPT], np.asarray(ids))
    # Reference: each row alone, unpadded, by full forward passes.
    for row, prompt in zip(got, rows, strict=True):
        alone = _greedy_reference(llama, jnp.asarray([prompt], jnp.int32), NEW, PROMPT + NEW)[0]
        np.testing.assert_array_equal(row[PROMPT:], alone[len(prompt) :])
    with pytest.raises(ValueError, match="left padding"):
        zoo_models.generate(llama, ids, prompt_mask=mask[:, ::-1], max_new_tokens=2, greedy=True)
