"""The hand-written float64 gated-delta-rule reference agrees with plain autodiff of a float64
token loop written here, and the suite's inputs hold their rules on every draw."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from zoo_attention.linear.testing import CASES, make_inputs, reference_gated_delta_rule


def _autodiff_rule(case, x):
    """The rule in float64 JAX, differentiated by jax.vjp (independent of the hand-written
    backward pass)."""
    ids = None if x.segment_ids is None else np.asarray(x.segment_ids)
    scale = case.scale if case.scale is not None else case.key_dim**-0.5
    group = case.num_heads // case.num_qk_heads

    def norm(a):
        return a / jnp.sqrt(jnp.sum(a * a, -1, keepdims=True) + 1e-6) if case.normalize_qk else a

    def rule(query, key, value, g, beta, *init):
        q = jnp.repeat(norm(query) * scale, group, axis=2)
        k = jnp.repeat(norm(key), group, axis=2)
        b, t, n, dv = value.shape
        s = init[0] if init else jnp.zeros((b, n, case.key_dim, dv), jnp.float64)
        starts = np.zeros((b, t), bool)
        if ids is not None:
            starts[:, 1:] = ids[:, 1:] != ids[:, :-1]

        def step(s, x):
            q_t, k_t, v_t, g_t, b_t, start = x
            s = s * jnp.where(start[:, None], 0.0, jnp.exp(g_t))[..., None, None]
            err = v_t - jnp.einsum("bnkv,bnk->bnv", s, k_t)
            s = s + jnp.einsum("bnk,bnv->bnkv", k_t, b_t[..., None] * err)
            return s, jnp.einsum("bnkv,bnk->bnv", s, q_t)

        xs = tuple(jnp.moveaxis(jnp.asarray(a), 1, 0) for a in (q, k, value, g, beta, starts))
        s, outs = jax.lax.scan(step, s, xs)
        return jnp.moveaxis(outs, 0, 1), s

    return rule


@pytest.mark.parametrize("case", [c for c in CASES if c.seq_len <= 100], ids=str)
def test_reference_gradients_match_autodiff_of_a_float64_loop(case):
    x = make_inputs(case, int(np.random.default_rng().integers(2**31)))
    arrays = {k: np.asarray(v.astype(jnp.float32), np.float64) for k, v in x.arrays.items()}
    d_out = np.asarray(x.d_out.astype(jnp.float32), np.float64)
    d_state = np.asarray(x.d_state, np.float64)
    with jax.enable_x64(True):
        out, vjp = jax.vjp(_autodiff_rule(case, x), *(jnp.asarray(a) for a in arrays.values()))
        grads = vjp((jnp.asarray(d_out), jnp.asarray(d_state)))
    ref = reference_gated_delta_rule(
        *(arrays[k] for k in ("query", "key", "value", "log_decay", "beta")),
        scale=case.scale,
        normalize_qk=case.normalize_qk,
        segment_ids=None if x.segment_ids is None else np.asarray(x.segment_ids),
        initial_state=arrays.get("initial_state"),
        d_out=d_out,
        d_state=d_state,
    )
    np.testing.assert_allclose(ref.out, np.asarray(out[0]), rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(ref.final_state, np.asarray(out[1]), rtol=1e-10, atol=1e-10)
    for name, grad in zip(arrays, grads, strict=True):
        np.testing.assert_allclose(ref.grads[name], np.asarray(grad), rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("case", CASES, ids=str)
def test_every_draw_keeps_decays_betas_and_documents_in_range(case):
    rng = np.random.default_rng()
    for _ in range(20):
        x = make_inputs(case, int(rng.integers(2**31)))
        g, beta = np.asarray(x.arrays["log_decay"]), np.asarray(x.arrays["beta"], np.float32)
        assert (g < 0).all() and (g > -60).all()
        assert (beta >= 0).all() and (beta <= 1).all()
        if case.segments == "none":
            assert x.segment_ids is None
            continue
        ids = np.asarray(x.segment_ids)
        starts = ids[:, 1:] != ids[:, :-1]
        assert starts.any(axis=1).all()  # every row is packed
        if case.segments == "chunk_edge":
            assert starts[:, 63].all()  # a document starts at token 64
