"""The hand-written float64 reference agrees with plain autodiff of a float64 jnp attention."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from zoo_attention.testing import reference_attention, reference_mask


def _jnp_attention(q, k, v, mask, scale, cap):
    g = q.shape[2] // k.shape[2]
    k = jnp.repeat(k, g, axis=2)
    v = jnp.repeat(v, g, axis=2)
    logits = jnp.einsum("btnh,bsnh->bnts", q, k) * scale
    if cap is not None:
        logits = cap * jnp.tanh(logits / cap)
    logits = jnp.where(mask[:, None], logits, -1e300)
    probs = jax.nn.softmax(logits, axis=-1)
    probs = jnp.where(mask[:, None].any(-1, keepdims=True), probs, 0.0)
    return jnp.einsum("bnts,bsnh->btnh", probs, v)


@pytest.mark.parametrize(
    ("causal", "window", "cap", "segmented", "heads"),
    [
        (False, None, None, False, (4, 4)),
        (True, (5, 1), 3.0, True, (6, 2)),
        (True, None, None, True, (4, 1)),
    ],
)
def test_reference_gradients_match_autodiff(causal, window, cap, segmented, heads):
    rng = np.random.default_rng()
    b, t, s, h = 2, 23, 23, 8
    n, kh = heads
    q, do = rng.standard_normal((2, b, t, n, h))
    k, v = rng.standard_normal((2, b, s, kh, h))
    ids = np.sort(rng.integers(0, 3, (b, t)), axis=1) if segmented else None
    # Unmatched query ids give rows that see nothing.
    q_ids = None if ids is None else np.where(np.arange(t) < 3, 9, ids)
    seg = None if ids is None else (q_ids, ids)
    ref = reference_attention(
        q,
        k,
        v,
        is_causal=causal,
        segment_ids=seg,
        local_window_size=window,
        logits_soft_cap=cap,
        scale=0.4,
        cotangent=do,
    )
    mask = reference_mask(b, t, s, is_causal=causal, segment_ids=seg, local_window=window)
    with jax.enable_x64(True):
        fn = lambda q, k, v: _jnp_attention(q, k, v, jnp.asarray(mask), 0.4, cap)
        out, vjp = jax.vjp(fn, *(jnp.asarray(x, jnp.float64) for x in (q, k, v)))
        dq, dk, dv = vjp(jnp.asarray(do, jnp.float64))
    np.testing.assert_allclose(ref.out, out, atol=1e-12)
    for got, want in ((ref.dq, dq), (ref.dk, dk), (ref.dv, dv)):
        np.testing.assert_allclose(got, want, atol=1e-11)
    if segmented:
        assert not ref.row_sees_key[:, :, :3].any()
        assert np.all(ref.out[:, :3] == 0)


def test_reference_mask_follows_the_contract():
    rng = np.random.default_rng()
    t, s = int(rng.integers(5, 30)), int(rng.integers(5, 30))
    left, right = (int(x) for x in rng.integers(0, 6, 2))
    mask = reference_mask(1, t, s, is_causal=True, local_window=(left, right))[0]
    for i in range(t):
        for j in range(s):
            assert mask[i, j] == (j <= i and i - left <= j <= i + right)
