"""The gated DeltaNet mixer against a float64 numpy layer written from transformers'
``Qwen3_5GatedDeltaNet`` definition (the recurrence by the contract's float64 reference), its
convolution against numpy, and cached decoding against the full pass."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from layers_reference import f64, linear

import zoo_layers as zl
from zoo_attention.linear.testing import reference_gated_delta_rule
from zoo_layers.deltanet import causal_conv, conv_history

jax.config.update("jax_default_matmul_precision", "highest")

D, K, N, DK, DV, W = 32, 2, 4, 8, 12, 4


def _layer(key) -> zl.GatedDeltaNet:
    layer = zl.GatedDeltaNet(D, K, N, DK, DV, conv_width=W, key=key)
    # Every parameter off its initial value, the norm's weight and the decay's biases included.
    leaves, tree = jax.tree_util.tree_flatten(layer)
    keys = jax.random.split(jax.random.fold_in(key, 1), len(leaves))
    leaves = [x + 0.2 * jax.random.normal(k, x.shape) for k, x in zip(keys, leaves, strict=True)]
    return jax.tree_util.tree_unflatten(tree, leaves)


def _numpy_conv(x, weight, segments=None):
    """``silu(conv1d(x, weight, padding=W-1)[:T])`` per channel, taps not crossing documents."""
    x, w = f64(x), f64(weight)
    t = x.shape[1]
    out = np.zeros_like(x)
    for i in range(t):
        for j in range(W):
            src = i - (W - 1) + j
            if src < 0:
                continue
            same = (
                1.0 if segments is None else (f64(segments)[:, src] == f64(segments)[:, i])[:, None]
            )
            out[:, i] += w[:, j] * x[:, src] * same
    return out / (1 + np.exp(-out))


def _numpy_layer(layer: zl.GatedDeltaNet, x, segments=None):
    b, t, _ = x.shape
    mixed = _numpy_conv(linear(x, layer.in_proj_qkv.weight, None), layer.conv_weight, segments)
    q, k, v = np.split(mixed, [K * DK, 2 * K * DK], axis=-1)
    z = linear(x, layer.in_proj_z.weight, None).reshape(b, t, N, DV)
    beta = 1 / (1 + np.exp(-linear(x, layer.in_proj_b.weight, None)))
    a = linear(x, layer.in_proj_a.weight, None) + f64(layer.dt_bias)
    g = -np.exp(f64(layer.a_log)) * np.log1p(np.exp(a))
    ref = reference_gated_delta_rule(
        q.reshape(b, t, K, DK),
        k.reshape(b, t, K, DK),
        v.reshape(b, t, N, DV),
        g,
        beta,
        normalize_qk=True,
        segment_ids=None if segments is None else np.asarray(segments),
    )
    o = ref.out / np.sqrt((ref.out**2).mean(-1, keepdims=True) + layer.norm.eps)
    o = o * f64(layer.norm.weight) * z / (1 + np.exp(-z))
    return linear(o.reshape(b, t, N * DV), layer.out_proj.weight, None)


def test_the_convolution_is_numpys_and_stops_at_documents(key):
    x = jax.random.normal(key, (2, 11, 6))
    weight = jax.random.normal(jax.random.fold_in(key, 1), (6, W))
    np.testing.assert_allclose(causal_conv(x, weight), _numpy_conv(x, weight), atol=1e-5)
    segments = jnp.asarray([[0] * 5 + [1] * 6, [3] * 2 + [4] * 9])
    got = causal_conv(x, weight, segments)
    np.testing.assert_allclose(got, _numpy_conv(x, weight, segments), atol=1e-5)
    # With its history (the state) the convolution of a piece is the whole's.
    history = conv_history(x[:, :7], jnp.zeros((2, W - 1, 6)))
    np.testing.assert_allclose(
        causal_conv(x[:, 7:], weight, history=history), causal_conv(x, weight)[:, 7:], atol=1e-6
    )


@pytest.mark.parametrize("packed", [False, True])
def test_the_layer_matches_numpy(key, packed):
    layer = _layer(key)
    x = jax.random.normal(jax.random.fold_in(key, 2), (2, 75, D))
    segments = (
        jnp.asarray(np.repeat([[0, 1, 2], [5, 5, 6]], [30, 20, 25], axis=1)) if packed else None
    )
    got = eqx.filter_jit(lambda m, x, s: m(x, segment_ids=s))(layer, x, segments)
    np.testing.assert_allclose(got, _numpy_layer(layer, x, segments), rtol=1e-4, atol=1e-4)


def test_decoding_in_pieces_equals_the_full_pass(key):
    layer = _layer(key)
    x = jax.random.normal(jax.random.fold_in(key, 3), (2, 21, D))
    want = eqx.filter_jit(zl.GatedDeltaNet.__call__)(layer, x)
    decode = eqx.filter_jit(zl.GatedDeltaNet.decode)
    xs = np.asarray(x)  # pieces cut on the host: no program per slice
    for pieces in [(21,), (9, 1, 1, 10), (1,) * 5 + (16,)]:
        conv = jnp.zeros((2, W - 1, layer.conv_channels))
        state = jnp.zeros((2, N, DK, DV))
        outs, start = [], 0
        for p in pieces:
            out, conv, state = decode(layer, xs[:, start : start + p], conv, state)
            outs.append(out)
            start += p
        np.testing.assert_allclose(jnp.concatenate(outs, 1), want, rtol=1e-5, atol=1e-5)


def test_left_padding_changes_no_state(key):
    layer = _layer(key)
    x = jax.random.normal(jax.random.fold_in(key, 4), (1, 9, D))
    padded = jnp.concatenate([jax.random.normal(key, (1, 4, D)), x], axis=1)
    mask = jnp.arange(13)[None] >= 4
    zeros = (jnp.zeros((1, W - 1, layer.conv_channels)), jnp.zeros((1, N, DK, DV)))
    decode = eqx.filter_jit(zl.GatedDeltaNet.decode)  # compiled: cheaper than op by op
    out, conv, state = decode(layer, x, *zeros)
    out_p, conv_p, state_p = decode(layer, padded, *zeros, mask)
    np.testing.assert_allclose(out_p[:, 4:], out, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(conv_p, conv, atol=1e-6)
    np.testing.assert_allclose(state_p, state, rtol=1e-5, atol=1e-5)


def test_names_of_the_weights(key):
    names = zl.logical_axes(zl.GatedDeltaNet(D, K, N, DK, DV, key=key))
    assert names.in_proj_qkv.weight.names == ("heads", "embed")
    assert names.out_proj.weight.names == ("embed", "heads")
    assert names.conv_weight.names == ("heads", None)
    with pytest.raises(ValueError, match="multiple of query/key heads"):
        zl.GatedDeltaNet(D, 3, 4, DK, DV, key=key)
