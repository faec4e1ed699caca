"""Next-token selection: temperature, top-k and top-p (nucleus) filtering, sampling.

Filters return logits with the removed entries set to ``-inf``; they are pure jax functions of
``[..., V]`` logits, usable inside a jitted decode loop.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, Int, PRNGKeyArray

__all__ = ["sample_logits", "top_k_filter", "top_p_filter"]


def top_k_filter(logits: Float[Array, "... V"], k: int) -> Float[Array, "... V"]:
    """Keep the ``k`` largest logits of each row (ties with the k-th are kept too)."""
    if not isinstance(k, int) or k < 1:
        raise ValueError(f"top_k must be a positive int, got {k!r}.")
    if k >= logits.shape[-1]:
        return logits
    kth = jax.lax.top_k(logits, k)[0][..., -1:]
    return jnp.where(logits < kth, -jnp.inf, logits)


def top_p_filter(
    logits: Float[Array, "... V"], p: float | Float[Array, ""]
) -> Float[Array, "... V"]:
    """Keep the nucleus: the fewest most-likely tokens whose probabilities sum to at least ``p``.

    A token stays when the probability mass of the tokens ranked above it is below ``p``, so the
    most likely token always stays. Tokens tied with the last kept one are kept too. ``p`` may
    be a traced scalar (then it is not validated).
    """
    if isinstance(p, int | float):
        if not 0.0 < p <= 1.0:
            raise ValueError(f"top_p must be in (0, 1], got {p!r}.")
        if p == 1.0:
            return logits
    probs = jax.nn.softmax(logits.astype(jnp.float32), axis=-1)
    sorted_probs = -jnp.sort(-probs, axis=-1)  # descending
    mass_above = jnp.cumsum(sorted_probs, axis=-1) - sorted_probs
    keep_sorted = mass_above < p
    # The smallest kept probability is the cut; everything at or above it stays.
    cut = jnp.min(jnp.where(keep_sorted, sorted_probs, jnp.inf), axis=-1, keepdims=True)
    return jnp.where(probs < cut, -jnp.inf, logits)


def sample_logits(
    logits: Float[Array, "B V"],
    key: PRNGKeyArray | None,
    *,
    temperature: float | Float[Array, ""] = 1.0,
    top_k: int | None = None,
    top_p: float | Float[Array, ""] | None = None,
    greedy: bool = False,
) -> Int[Array, " B"]:
    """One token per row: argmax when ``greedy``, else a sample after temperature/top-k/top-p.

    Temperature divides the logits before filtering; top-k is applied before top-p (as in
    Hugging Face ``generate``). ``temperature`` and ``top_p`` may be traced scalars, so a
    jitted loop need not recompile when they change.
    """
    if greedy:
        return jnp.argmax(logits, axis=-1).astype(jnp.int32)
    if key is None:
        raise ValueError("Sampling needs a PRNG key; pass key=jax.random.key(seed) or greedy=True.")
    if isinstance(temperature, int | float) and not temperature > 0.0:
        raise ValueError(
            f"temperature must be > 0, got {temperature!r}; use greedy=True for argmax decoding."
        )
    logits = logits.astype(jnp.float32) / temperature
    if top_k is not None:
        logits = top_k_filter(logits, top_k)
    if top_p is not None:
        logits = top_p_filter(logits, top_p)
    return jax.random.categorical(key, logits, axis=-1).astype(jnp.int32)
