"""A block's MLP branch computed one chunk of the sequence at a time (``mlp_chunk``): the same
values and gradients as the whole branch by plain autodiff, float32 gradient sums for bfloat16
weights, and a fraction of the whole branch's temporaries."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import zoo_layers as zl

jax.config.update("jax_default_matmul_precision", "highest")

D, HIDDEN = 32, 96


def _block(key, chunk, dropout=0.0):
    k1, k2 = jax.random.split(key)
    return zl.TransformerBlock(
        attn_norm=zl.RMSNorm(D),
        attn=zl.Attention(D, 4, num_kv_heads=2, key=k1),
        mlp_norm=zl.RMSNorm(D),
        mlp=zl.MLP(D, HIDDEN, activation="silu", gated=True, key=k2),
        post_mlp_norm=zl.RMSNorm(D, unit_offset=True),
        dropout=zl.Dropout(dropout),
        mlp_chunk=chunk,
    )


def _branch(parts, x):
    norm, mlp, post = parts
    return x + post(mlp(norm(x)))


def _parts(block):
    return (block.mlp_norm, block.mlp, block.post_mlp_norm)


def _loss(fn, parts, x, probe):
    return jnp.sum(fn(parts, x) * probe)


@pytest.mark.parametrize(
    ("t", "chunk"),
    [
        (64, 16),
        # Six chunks instead of four: chunked_tokens' path as [64-16].
        pytest.param(48, 8, marks=pytest.mark.full),
    ],
)
def test_chunked_tokens_equal_the_whole_branch_and_its_gradients(t, chunk):
    kb, kx, kp = jax.random.split(jax.random.key(t + chunk), 3)
    parts = _parts(_block(kb, None))
    x = jax.random.normal(kx, (2, t, D))
    probe = jax.random.normal(kp, (2, t, D))
    whole = lambda p, x: _loss(_branch, p, x, probe)
    chunked = lambda p, x: _loss(lambda q, y: zl.chunked_tokens(_branch, q, y, chunk), p, x, probe)
    forward = eqx.filter_jit(lambda p, x: zl.chunked_tokens(_branch, p, x, chunk))
    np.testing.assert_allclose(forward(parts, x), _branch(parts, x), rtol=1e-6, atol=1e-6)
    (gp, gx) = eqx.filter_jit(jax.grad(chunked, argnums=(0, 1)))(parts, x)
    (rp, rx) = eqx.filter_jit(jax.grad(whole, argnums=(0, 1)))(parts, x)
    np.testing.assert_allclose(gx, rx, rtol=1e-5, atol=1e-5)
    for a, b in zip(jax.tree.leaves(gp), jax.tree.leaves(rp), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5 * float(jnp.max(jnp.abs(b))))


def test_bfloat16_weight_gradients_add_up_in_float32():
    # Eight chunks of bfloat16 partial gradients: summed in bfloat16 they would be rounded seven
    # more times than the whole branch's; summed in float32 they land as close to the float32
    # gradient as the whole branch's own (one rounding each).
    kb, kx, kp = jax.random.split(jax.random.key(3), 3)
    parts32 = _parts(_block(kb, None))
    parts16 = jax.tree.map(
        lambda a: a.astype(jnp.bfloat16) if eqx.is_inexact_array(a) else a, parts32
    )
    x = jax.random.normal(kx, (4, 256, D), jnp.bfloat16)
    probe = jax.random.normal(kp, (4, 256, D), jnp.bfloat16)
    whole = lambda p: _loss(_branch, p, x, probe).astype(jnp.float32)
    chunked = lambda p: _loss(
        lambda q, y: zl.chunked_tokens(_branch, q, y, 32), p, x, probe
    ).astype(jnp.float32)
    reference = eqx.filter_jit(
        jax.grad(lambda p: _loss(_branch, p, x.astype(jnp.float32), probe.astype(jnp.float32)))
    )(parts32)
    got, whole_got = (eqx.filter_jit(jax.grad(f))(parts16) for f in (chunked, whole))
    for c, w, r in zip(*(jax.tree.leaves(g) for g in (got, whole_got, reference)), strict=True):
        assert c.dtype == jnp.bfloat16
        scale = float(jnp.max(jnp.abs(r)))
        error = float(jnp.max(jnp.abs(c.astype(jnp.float32) - r))) / scale
        whole_error = float(jnp.max(jnp.abs(w.astype(jnp.float32) - r))) / scale
        assert error <= 1.5 * whole_error + 2e-3, (error, whole_error)


def _stack(chunk, dropout=0.0):
    return zl.LayerStack.init(
        lambda phase, key: _block(key, chunk, dropout),
        2,
        remat=True,
        scan=True,
        key=jax.random.key(5),
    )


def test_a_rematerialised_stack_with_mlp_chunks_equals_one_without():
    x = jax.random.normal(jax.random.key(1), (2, 64, D))
    pos = jnp.broadcast_to(jnp.arange(64), (2, 64))
    loss = lambda s: jnp.sum(jnp.tanh(s(x, pos)))
    value_and_grad = eqx.filter_jit(eqx.filter_value_and_grad(loss))
    (l1, g1), (l0, g0) = (value_and_grad(s) for s in (_stack(16), _stack(None)))
    np.testing.assert_allclose(l1, l0, rtol=1e-6)
    g1, g0 = (eqx.filter(g, eqx.is_array) for g in (g1, g0))
    for a, b in zip(jax.tree.leaves(g1), jax.tree.leaves(g0), strict=True):
        np.testing.assert_allclose(a, b, rtol=2e-5, atol=2e-5 * float(jnp.max(jnp.abs(b))))


def test_active_dropout_and_short_or_uneven_sequences_run_whole():
    x = jax.random.normal(jax.random.key(2), (2, 48, D))
    pos = jnp.broadcast_to(jnp.arange(48), (2, 48))
    key = jax.random.key(9)
    # Dropout's mask is drawn over the whole branch: with a key and a rate the branch is whole,
    # so the same key gives the same result as a block without chunks.
    run = eqx.filter_jit(lambda s: s(x, pos, key=key))
    np.testing.assert_array_equal(run(_stack(16, dropout=0.1)), run(_stack(None, dropout=0.1)))
    block = _block(jax.random.key(4), 32)
    assert not block._chunks(x, None)  # 48 tokens are not a multiple of 32
    assert not block._chunks(x[:, :32], None)  # nor longer than one chunk
    assert block._chunks(jnp.concatenate([x, x[:, :16]], axis=1), None)


def test_chunks_hold_a_fraction_of_the_whole_branchs_temporaries():
    # Hidden activations [2, 1024, 2048] float32 (16 MiB each, three or more live in a gated
    # MLP's backward pass); in four chunks a quarter of each.
    t, hidden = 1024, 2048

    def make(chunk):
        def block(phase, key):
            k1, k2 = jax.random.split(key)
            return zl.TransformerBlock(
                attn_norm=zl.RMSNorm(D),
                attn=zl.Attention(D, 4, key=k1),
                mlp_norm=zl.RMSNorm(D),
                mlp=zl.MLP(D, hidden, activation="silu", gated=True, key=k2),
                mlp_chunk=chunk,
            )

        return zl.LayerStack.init(block, 2, remat=True, scan=True, key=jax.random.key(0))

    x = jax.ShapeDtypeStruct((2, t, D), jnp.float32)
    pos = jnp.broadcast_to(jnp.arange(t), (2, t))

    def temporaries(chunk):
        step = jax.jit(jax.grad(lambda s, x: jnp.sum(s(x, pos) ** 2)))
        return step.lower(make(chunk), x).compile().memory_analysis().temp_size_in_bytes

    whole, chunked = temporaries(None), temporaries(t // 4)
    activation = 2 * t * hidden * 4
    assert chunked <= whole - 3 * activation * 3 // 4, (whole, chunked)
