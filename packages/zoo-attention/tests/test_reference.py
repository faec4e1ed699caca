"""The hand-written float64 reference agrees with plain autodiff of a float64 jnp attention."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from zoo_attention.testing import reference_attention, reference_mask


def _jnp_attention(q, k, v, mask, scale, cap, sinks=None):
    g = q.shape[2] // k.shape[2]
    k = jnp.repeat(k, g, axis=2)
    v = jnp.repeat(v, g, axis=2)
    logits = jnp.einsum("btnh,bsnh->bnts", q, k) * scale
    if cap is not None:
        logits = cap * jnp.tanh(logits / cap)
    logits = jnp.where(mask[:, None], logits, -1e300)
    if sinks is None:
        probs = jax.nn.softmax(logits, axis=-1)
    else:
        # gpt-oss's formulation: the sink as one more column, dropped after the softmax.
        column = jnp.broadcast_to(sinks[None, :, None, None], (*logits.shape[:-1], 1))
        probs = jax.nn.softmax(jnp.concatenate([logits, column], axis=-1), axis=-1)[..., :-1]
    probs = jnp.where(mask[:, None].any(-1, keepdims=True), probs, 0.0)
    return jnp.einsum("bnts,bsnh->btnh", probs, v)


@pytest.mark.parametrize(
    ("causal", "window", "cap", "segmented", "heads", "sinks", "hv"),
    [
        (False, None, None, False, (4, 4), False, 8),
        (True, (5, 1), 3.0, True, (6, 2), False, 8),
        (True, None, None, True, (4, 1), False, 8),
        # Contract 1.3: sinks, values narrower and wider than the queries.
        (True, (5, 1), 3.0, True, (6, 2), True, 8),
        (False, None, None, False, (4, 4), False, 5),
        (True, None, 2.0, True, (4, 2), True, 12),
    ],
)
def test_reference_gradients_match_autodiff(causal, window, cap, segmented, heads, sinks, hv):
    rng = np.random.default_rng()
    b, t, s, h = 2, 23, 23, 8
    n, kh = heads
    q = rng.standard_normal((b, t, n, h))
    do = rng.standard_normal((b, t, n, hv))
    k = rng.standard_normal((b, s, kh, h))
    v = rng.standard_normal((b, s, kh, hv))
    sink = 2.0 * rng.standard_normal(n) if sinks else None
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
        sinks=sink,
        cotangent=do,
    )
    mask = reference_mask(b, t, s, is_causal=causal, segment_ids=seg, local_window=window)
    with jax.enable_x64(True):
        fn = lambda q, k, v, sk: _jnp_attention(q, k, v, jnp.asarray(mask), 0.4, cap, sk)
        primals = [jnp.asarray(x, jnp.float64) for x in (q, k, v)]
        primals.append(None if sink is None else jnp.asarray(sink, jnp.float64))
        out, vjp = jax.vjp(fn, *primals)
        dq, dk, dv, dsinks = vjp(jnp.asarray(do, jnp.float64))
    np.testing.assert_allclose(ref.out, out, atol=1e-12)
    for got, want in ((ref.dq, dq), (ref.dk, dk), (ref.dv, dv)):
        np.testing.assert_allclose(got, want, atol=1e-11)
    if sinks:
        np.testing.assert_allclose(ref.dsinks, dsinks, atol=1e-11)
    else:
        assert ref.dsinks is None
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
