"""Norms, linear, embedding, MLP and rotary embeddings against float64 numpy references."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from layers_reference import (
    ACTS,
    f64,
    inv_freq,
    layernorm,
    linear,
    rmsnorm,
    rope,
    rope_interleaved,
    yarn_inv_freq,
)

import zoo_layers as zl

jax.config.update("jax_default_matmul_precision", "highest")


def _rand(key, shape, scale=1.0):
    return scale * jax.random.normal(key, shape, jnp.float32)


@pytest.mark.parametrize("use_bias", [True, False])
def test_layernorm(key, use_bias):
    k1, k2, k3 = jax.random.split(key, 3)
    norm = zl.LayerNorm(48, eps=1e-5, use_bias=use_bias)
    norm = eqx_set(norm, weight=_rand(k1, (48,)), bias=_rand(k2, (48,)) if use_bias else None)
    x = _rand(k3, (3, 5, 48), 3.0) + 1.5
    want = layernorm(x, norm.weight, norm.bias, 1e-5)
    np.testing.assert_allclose(norm(x), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("unit_offset", [False, True])
def test_rmsnorm(key, unit_offset):
    k1, k2 = jax.random.split(key)
    norm = zl.RMSNorm(32, eps=1e-6, unit_offset=unit_offset)
    # Gemma stores zeros (scale 1); the plain variant stores ones.
    np.testing.assert_array_equal(norm.weight, 0.0 if unit_offset else 1.0)
    norm = eqx_set(norm, weight=_rand(k1, (32,)))
    x = _rand(k2, (2, 7, 32), 2.0)
    np.testing.assert_allclose(
        norm(x), rmsnorm(x, norm.weight, 1e-6, unit_offset), rtol=1e-5, atol=1e-5
    )


def test_norms_run_in_float32_and_return_input_dtype(key):
    x = _rand(key, (4, 64), 100.0).astype(jnp.bfloat16)
    for norm in (zl.LayerNorm(64), zl.RMSNorm(64), zl.RMSNorm(64, unit_offset=True)):
        out = norm(x)
        assert out.dtype == jnp.bfloat16
        ref = (
            layernorm(f64(x), np.ones(64), np.zeros(64), 1e-5)
            if isinstance(norm, zl.LayerNorm)
            else rmsnorm(
                f64(x),
                np.ones(64) if not norm.unit_offset else np.zeros(64),
                1e-6,
                norm.unit_offset,
            )
        )
        np.testing.assert_allclose(f64(out), ref, atol=2e-2, rtol=1e-2)


@pytest.mark.parametrize("use_bias", [True, False])
def test_linear(key, use_bias):
    k1, k2, k3 = jax.random.split(key, 3)
    lin = zl.Linear(24, 40, use_bias=use_bias, key=k1)
    assert lin.weight.shape == (40, 24)
    if use_bias:
        lin = eqx_set(lin, bias=_rand(k2, (40,)))
    x = _rand(k3, (2, 3, 24))
    np.testing.assert_allclose(lin(x), linear(x, lin.weight, lin.bias), rtol=1e-5, atol=1e-5)


def test_embedding_lookup_and_attend(key):
    k1, k2, k3 = jax.random.split(key, 3)
    emb = zl.Embedding(50, 16, key=k1)
    ids = jax.random.randint(k2, (3, 9), 0, 50)
    np.testing.assert_array_equal(emb(ids), np.asarray(emb.weight)[np.asarray(ids)])
    x = _rand(k3, (3, 9, 16))
    logits = emb.attend(x)
    assert logits.dtype == jnp.float32
    np.testing.assert_allclose(logits, f64(x) @ f64(emb.weight).T, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    ("activation", "gated"),
    [("gelu_tanh", False), ("gelu", False), ("silu", True), ("gelu_tanh", True), ("relu", False)],
)
@pytest.mark.parametrize("use_bias", [False, True])
def test_mlp(key, activation, gated, use_bias):
    k1, k2, k3 = jax.random.split(key, 3)
    mlp = zl.MLP(
        16, 40, activation=activation, gated=gated, use_bias=use_bias, init_std=0.3, key=k1
    )
    if use_bias:
        kb = jax.random.split(k2, 3)
        mlp = eqx_set(mlp, **{"up.bias": _rand(kb[0], (40,)), "down.bias": _rand(kb[1], (16,))})
        if gated:
            mlp = eqx_set(mlp, **{"gate.bias": _rand(kb[2], (40,))})
    x = _rand(k3, (2, 5, 16))
    act = ACTS[activation]
    up = linear(x, mlp.up.weight, mlp.up.bias)
    h = act(linear(x, mlp.gate.weight, mlp.gate.bias)) * up if gated else act(up)
    want = linear(h, mlp.down.weight, mlp.down.bias)
    np.testing.assert_allclose(mlp(x), want, rtol=1e-4, atol=1e-5)


def test_unknown_activation_is_a_clear_error(key):
    with pytest.raises(ValueError, match="unknown activation 'swish'"):
        zl.MLP(8, 16, activation="swish", key=key)


@pytest.mark.parametrize(
    "scaling",
    [
        zl.RopeScaling(),
        zl.RopeScaling("linear", factor=4.0),
        # original_max_position small enough that all three llama3 bands occur at head_dim 64.
        zl.RopeScaling(
            "llama3",
            factor=8.0,
            low_freq_factor=1.0,
            high_freq_factor=4.0,
            original_max_position=256,
        ),
        zl.RopeScaling(
            "llama3",
            factor=32.0,
            low_freq_factor=1.0,
            high_freq_factor=4.0,
            original_max_position=8192,
        ),
    ],
    ids=["none", "linear", "llama3-small", "llama3.2"],
)
def test_rope_frequencies(scaling):
    theta = 500000.0
    got = zl.rope_frequencies(64, theta, scaling)
    want = inv_freq(
        64,
        theta,
        scaling.kind,
        scaling.factor,
        scaling.low_freq_factor,
        scaling.high_freq_factor,
        scaling.original_max_position,
    )
    np.testing.assert_allclose(got, want, rtol=2e-6)
    if scaling.kind == "llama3":
        unchanged = np.isclose(want, inv_freq(64, theta), rtol=1e-12)
        fully = np.isclose(want, inv_freq(64, theta) / scaling.factor, rtol=1e-12)
        if scaling.original_max_position == 256:
            assert unchanged.any() and fully.any() and (~unchanged & ~fully).any()


@pytest.mark.parametrize("kind", ["none", "linear", "llama3"])
def test_rotary_matches_complex_rotation(key, kind):
    k1, k2 = jax.random.split(key)
    scaling = zl.RopeScaling(kind, factor=2.0, original_max_position=64) if kind != "none" else None
    rot = zl.Rotary(32, theta=10000.0, scaling=scaling)
    x = _rand(k1, (2, 11, 3, 32))
    positions = jax.random.randint(k2, (2, 11), 0, 500)
    want = rope(x, positions, inv_freq(32, 10000.0, kind, 2.0, 1.0, 4.0, 64))
    np.testing.assert_allclose(rot(x, positions), want, rtol=1e-4, atol=1e-4)


def test_rotary_scores_depend_only_on_relative_position(key):
    k1, k2 = jax.random.split(key)
    rot = zl.Rotary(16)
    q = _rand(k1, (1, 1, 1, 16))
    k = _rand(k2, (1, 1, 1, 16))

    def score(pq, pk):
        a = rot(q, jnp.array([[pq]]))
        b = rot(k, jnp.array([[pk]]))
        return float(jnp.sum(a * b))

    assert score(7, 3) == pytest.approx(score(104, 100), rel=1e-4, abs=1e-5)
    assert score(7, 3) != pytest.approx(score(7, 4), rel=1e-3)


def test_bad_rope_inputs_are_clear_errors():
    with pytest.raises(ValueError, match="even `head_dim`"):
        zl.Rotary(15)
    with pytest.raises(ValueError, match="'none', 'linear', 'llama3' or 'yarn'"):
        zl.RopeScaling("dynamic")  # type: ignore[arg-type]


@pytest.mark.parametrize("truncate", [True, False])
def test_yarn_frequencies_and_factor_follow_the_definition(truncate):
    scaling = zl.RopeScaling("yarn", factor=32.0, original_max_position=4096, truncate=truncate)
    got = zl.rope_frequencies(64, 150000.0, scaling)
    want = yarn_inv_freq(64, 150000.0, 32.0, 4096, truncate=truncate)
    np.testing.assert_allclose(got, want, rtol=2e-6)
    kept, divided = (
        np.isclose(want, inv_freq(64, 150000.0)),
        np.isclose(want, inv_freq(64, 150000.0) / 32.0),
    )
    assert kept.any() and divided.any() and (~kept & ~divided).any()
    assert scaling.attention_factor() == pytest.approx(0.1 * np.log(32.0) + 1.0)
    # DeepSeek's: the ratio of the mscale and mscale_all_dim corrections.
    deepseek = zl.RopeScaling("yarn", factor=40.0, mscale=1.0, mscale_all_dim=0.5)
    ratio = (0.1 * np.log(40.0) + 1.0) / (0.05 * np.log(40.0) + 1.0)
    assert deepseek.attention_factor() == pytest.approx(ratio)


def test_interleaved_yarn_rotary_matches_complex_rotation(key):
    k1, k2 = jax.random.split(key)
    scaling = zl.RopeScaling("yarn", factor=4.0, original_max_position=16)
    rot = zl.Rotary(16, theta=10000.0, scaling=scaling, interleaved=True)
    x = _rand(k1, (2, 7, 3, 16))
    positions = jax.random.randint(k2, (2, 7), 0, 300)
    want = rope_interleaved(x, positions, yarn_inv_freq(16, 10000.0, 4.0, 16))
    np.testing.assert_allclose(
        rot(x, positions), want * scaling.attention_factor(), rtol=1e-4, atol=1e-4
    )


def test_dropout(key):
    k1, k2 = jax.random.split(key)
    drop = zl.Dropout(0.25)
    x = jnp.ones((200, 200))
    np.testing.assert_array_equal(drop(x), x)  # no key: inference
    y = drop(x, key=k1)
    kept = np.asarray(y) != 0
    assert abs(kept.mean() - 0.75) < 0.01
    np.testing.assert_allclose(np.asarray(y)[kept], 1 / 0.75, rtol=1e-6)
    assert not np.array_equal(np.asarray(drop(x, key=k2)) != 0, kept)
    np.testing.assert_array_equal(zl.Dropout(0.0)(x, key=k1), x)
    with pytest.raises(ValueError, match=r"dropout `rate` must be in \[0, 1\)"):
        zl.Dropout(1.0)


def eqx_set(module, **values):
    """Replace leaves by dotted path (``"up.bias"``)."""
    import equinox as eqx

    for path, value in values.items():

        def where(m, path=path):
            for part in path.split("."):
                m = getattr(m, part)
            return m

        module = eqx.tree_at(where, module, value, is_leaf=lambda x: x is None)
    return module
