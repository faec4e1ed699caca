"""Cached decoding (prefill, chunks, single steps) gives the logits of the full forward pass."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from models_helpers import (
    BATCH,
    FAMILY_PRESETS,
    LENGTH,
    decode,
    decode_in_chunks,
    forward,
    ids,
    tiny_model,
)

jax.config.update("jax_default_matmul_precision", "highest")

# Llama, Qwen2, Qwen3 and OLMo 2 decode through the same projections (biases and qk-norms act in
# the one ``_project`` that the full pass and decode share), the same RoPE and the same cache as
# Mistral, kept here (Mistral adds the window); make test-full runs them.
_SAME_DECODE_PATH = ("llama-tiny", "qwen2-tiny", "qwen3-tiny", "olmo2-tiny")
DECODE_PRESETS = [
    pytest.param(n, marks=pytest.mark.full) if n in _SAME_DECODE_PATH else n for n in FAMILY_PRESETS
]


@pytest.mark.parametrize("name", DECODE_PRESETS)
def test_prefill_then_steps_match_full_pass(name):
    """20 tokens, window 8 (Mistral, Gemma 2 local layers): prefill 7, a chunk of 5, then steps."""
    model = tiny_model(name)
    tokens = ids(jax.random.key(1), model.config, BATCH, LENGTH)
    want = forward(model, tokens)
    got, cache = decode_in_chunks(model, tokens)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    assert int(cache.index) == LENGTH
    np.testing.assert_array_equal(
        cache.positions[:, :LENGTH], np.broadcast_to(np.arange(LENGTH), (2, LENGTH))
    )
    assert bool(cache.valid[:, :LENGTH].all()) and not bool(cache.valid[:, LENGTH:].any())


@pytest.mark.parametrize("name", DECODE_PRESETS)
def test_left_padded_prompt_decodes_like_the_unpadded_one(name):
    """Row 1 is row 0 behind 4 padding tokens: its logits equal row 0's, shifted."""
    model = tiny_model(name)
    pad = 4
    row = ids(jax.random.key(2), model.config, 1, LENGTH)
    # The padding holds arbitrary tokens: they must not matter.
    tokens = jnp.concatenate([row, jnp.concatenate([row[:, :pad] + 1, row[:, : LENGTH - pad]], 1)])
    mask = jnp.asarray(np.arange(LENGTH)[None, :] >= np.array([[0], [pad]]))
    got, cache = decode_in_chunks(model, tokens, attention_mask=mask)
    np.testing.assert_allclose(got[1, pad:], got[0, : LENGTH - pad], rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(got[0], forward(model, tokens)[0], rtol=1e-4, atol=1e-4)
    # Positions count only real tokens.
    np.testing.assert_array_equal(cache.positions[1, pad:LENGTH], np.arange(LENGTH - pad))


def test_decode_rejects_mismatched_cache():
    model = tiny_model("llama-tiny")
    tokens = ids(jax.random.key(3), model.config, 2, 4)
    with pytest.raises(ValueError, match=r"use model\.init_cache"):
        model.decode(tokens, model.init_cache(3, 8))
    with pytest.raises(ValueError, match="do not fit a cache of 2 slots"):
        model.decode(tokens, model.init_cache(2, 2))
    with pytest.raises(ValueError, match="must be an integer array"):
        model.decode(tokens.astype(jnp.float32), model.init_cache(2, 8))


def test_decode_outputs_float32_logits_and_a_cache_in_the_compute_dtype():
    model = tiny_model("qwen2-tiny")
    tokens = ids(jax.random.key(3), model.config, BATCH, 7)
    logits, cache = decode(model, tokens, model.init_cache(BATCH, 24), jnp.ones((BATCH, 7), bool))
    assert logits.shape == (BATCH, 7, model.config.vocab_size) and logits.dtype == jnp.float32
    assert cache.key.shape == (2, BATCH, 24, 1, 16) and cache.key.dtype == jnp.float32
