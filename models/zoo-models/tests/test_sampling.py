"""Token filters and sampling against numpy references."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from zoo_models import sample_logits, top_k_filter, top_p_filter


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _top_p_reference(logits: np.ndarray, p: float) -> np.ndarray:
    """Hugging Face's formulation: drop ascending-sorted tokens while their cumulative mass <= 1-p."""
    out = logits.copy()
    for row in range(logits.shape[0]):
        order = np.argsort(logits[row])  # ascending
        cum = np.cumsum(_softmax(logits[row][order]))
        remove = cum <= 1.0 - p
        remove[-1] = False  # the most likely token always stays
        out[row, order[remove]] = -np.inf
    return out


def _top_k_reference(logits: np.ndarray, k: int) -> np.ndarray:
    out = logits.copy()
    for row in range(logits.shape[0]):
        out[row, np.argsort(-logits[row])[k:]] = -np.inf
    return out


@pytest.mark.parametrize("p", [0.1, 0.5, 0.9, 0.99])
def test_top_p_matches_reference(p: float) -> None:
    rng = np.random.default_rng(int(p * 100))
    logits = rng.normal(size=(16, 50)) * rng.uniform(0.5, 4.0, size=(16, 1))
    got = np.asarray(top_p_filter(jnp.asarray(logits, jnp.float32), p))
    want = _top_p_reference(logits, p)
    np.testing.assert_array_equal(np.isinf(got), np.isinf(want))
    kept = ~np.isinf(want)
    np.testing.assert_allclose(got[kept], logits[kept], rtol=1e-6)
    # The nucleus holds at least p of the mass and is minimal: dropping its least likely token
    # would leave less than p.
    probs = _softmax(logits)
    for row in range(16):
        mass = probs[row][kept[row]]
        assert mass.sum() >= p - 1e-6
        assert mass.sum() - mass.min() < p + 1e-6


@pytest.mark.parametrize("k", [1, 3, 10])
def test_top_k_matches_reference(k: int) -> None:
    logits = np.random.default_rng(k).normal(size=(8, 40))
    got = np.asarray(top_k_filter(jnp.asarray(logits, jnp.float32), k))
    want = _top_k_reference(logits, k)
    np.testing.assert_array_equal(np.isinf(got), np.isinf(want))
    assert (~np.isinf(got)).sum(-1).tolist() == [k] * 8


def test_top_k_one_and_greedy_are_argmax() -> None:
    logits = jax.random.normal(jax.random.key(0), (32, 77))
    want = np.argmax(np.asarray(logits), -1)
    np.testing.assert_array_equal(sample_logits(logits, None, greedy=True), want)
    for seed in range(3):
        got = sample_logits(logits, jax.random.key(seed), top_k=1, temperature=0.7)
        np.testing.assert_array_equal(got, want)


def test_sample_frequencies_follow_filtered_distribution() -> None:
    # One row repeated many times: empirical frequencies estimate the sampling distribution.
    row = np.array([2.0, 1.5, 1.0, 0.5, 0.0, -0.5, -1.0, -3.0])
    n = 40_000
    logits = jnp.asarray(np.tile(row, (n, 1)), jnp.float32)
    temperature, k, p = 0.8, 5, 0.8
    draws = np.asarray(
        sample_logits(logits, jax.random.key(3), temperature=temperature, top_k=k, top_p=p)
    )
    scaled = row / temperature
    want = _top_p_reference(_top_k_reference(scaled[None], k), p)[0]
    want = _softmax(want)
    freq = np.bincount(draws, minlength=row.size) / n
    np.testing.assert_allclose(freq, want, atol=0.01)
    assert freq[want == 0].sum() == 0


def test_sampling_errors() -> None:
    logits = jnp.zeros((2, 5))
    with pytest.raises(ValueError, match="key"):
        sample_logits(logits, None)
    with pytest.raises(ValueError, match="temperature"):
        sample_logits(logits, jax.random.key(0), temperature=0.0)
    with pytest.raises(ValueError, match="top_p"):
        top_p_filter(logits, 1.5)
    with pytest.raises(ValueError, match="top_k"):
        top_k_filter(logits, 0)
