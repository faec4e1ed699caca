"""Random inputs and comparisons shared by the tests."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from zoo_attention.testing import reference_attention


def random_inputs(
    rng: np.random.Generator,
    b: int,
    t: int,
    s: int,
    n: int,
    k: int,
    h: int,
    dtype: Any = jnp.float32,
) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
    """``query, key, value, cotangent`` drawn from a standard normal."""

    def normal(*shape: int) -> jax.Array:
        return jnp.asarray(rng.standard_normal(shape), dtype)

    return normal(b, t, n, h), normal(b, s, k, h), normal(b, s, k, h), normal(b, t, n, h)


def packed_ids(rng: np.random.Generator, b: int, length: int, docs: int) -> jax.Array:
    """Sorted segment ids ``[b, length]``: ``docs`` contiguous documents per row, as packing gives."""
    rows = []
    for _ in range(b):
        cuts = np.sort(rng.choice(np.arange(1, length), size=docs - 1, replace=False))
        rows.append(np.searchsorted(cuts, np.arange(length), side="right"))
    return jnp.asarray(np.stack(rows), jnp.int32)


def reference(q, k, v, do, **kwargs: Any):
    """The float64 numpy reference of ``zoo_attention.testing``, on float64 copies."""
    ids = kwargs.get("segment_ids")
    if isinstance(ids, tuple):
        ids = tuple(np.asarray(x) for x in ids)
    elif ids is not None:
        ids = np.asarray(ids)
    f64 = lambda x: np.asarray(x).astype(np.float64)
    return reference_attention(
        f64(q),
        f64(k),
        f64(v),
        scale=kwargs.get("scale"),
        is_causal=kwargs.get("is_causal", False),
        segment_ids=ids,
        local_window_size=kwargs.get("local_window_size"),
        logits_soft_cap=kwargs.get("logits_soft_cap"),
        cotangent=None if do is None else f64(do),
    )


def max_error(got: jax.Array, want: np.ndarray) -> float:
    """``max |got - want| / max(1, max |want|)``."""
    got64 = np.asarray(got).astype(np.float64)
    assert got64.shape == want.shape
    assert np.all(np.isfinite(got64))
    return float(np.max(np.abs(got64 - want)) / max(1.0, float(np.max(np.abs(want)))))
