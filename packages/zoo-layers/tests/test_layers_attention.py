"""The attention layer against a float64 numpy attention, and cached decoding against the full pass."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from layers_reference import attention, f64, inv_freq, linear, rmsnorm, rope

import zoo_layers as zl

jax.config.update("jax_default_matmul_precision", "highest")


def _randomise(module, key, scale=0.3):
    """Every float leaf replaced by fresh normal noise (biases and norm weights included)."""
    leaves, tree = jax.tree_util.tree_flatten(module)
    keys = jax.random.split(key, len(leaves))
    leaves = [
        scale * jax.random.normal(k, x.shape, x.dtype) if eqx.is_inexact_array(x) else x
        for k, x in zip(keys, leaves, strict=True)
    ]
    return jax.tree_util.tree_unflatten(tree, leaves)


def _numpy_layer(attn: zl.Attention, x, positions, segments=None):
    b, t, _ = x.shape
    n, kh, hd = attn.num_heads, attn.num_kv_heads, attn.head_dim
    q = linear(x, attn.q_proj.weight, attn.q_proj.bias)
    gate = None
    if attn.output_gate:
        # Each head's query, then its gate, in q_proj's output (Qwen3.5).
        both = q.reshape(b, t, n, 2, hd)
        q, gate = both[..., 0, :].reshape(b, t, n * hd), both[..., 1, :].reshape(b, t, n * hd)
    k = linear(x, attn.k_proj.weight, attn.k_proj.bias)
    v = linear(x, attn.v_proj.weight, attn.v_proj.bias).reshape(b, t, kh, hd)
    if attn.q_norm is not None and attn.q_norm.weight.shape[-1] != hd:
        # Over the whole projection (OLMo 2), before the heads are split.
        q = rmsnorm(q, attn.q_norm.weight, attn.q_norm.eps, attn.q_norm.unit_offset)
        k = rmsnorm(k, attn.k_norm.weight, attn.k_norm.eps, attn.k_norm.unit_offset)
    q, k = q.reshape(b, t, n, hd), k.reshape(b, t, kh, hd)
    if attn.q_norm is not None and attn.q_norm.weight.shape[-1] == hd:
        q = rmsnorm(q, attn.q_norm.weight, attn.q_norm.eps, attn.q_norm.unit_offset)
        k = rmsnorm(k, attn.k_norm.weight, attn.k_norm.eps, attn.k_norm.unit_offset)
    if attn.rotary is not None:
        r = attn.rotary
        turned = r.head_dim  # a partial rotation turns the first features only
        freqs = inv_freq(
            turned,
            r.theta,
            r.scaling.kind,
            r.scaling.factor,
            r.scaling.low_freq_factor,
            r.scaling.high_freq_factor,
            r.scaling.original_max_position,
        )
        q = np.concatenate([rope(q[..., :turned], positions, freqs), q[..., turned:]], -1)
        k = np.concatenate([rope(k[..., :turned], positions, freqs), k[..., turned:]], -1)
    scale = attn.scale if attn.scale is not None else hd**-0.5
    o = attention(
        q, k, v, scale=scale, window=attn.window, soft_cap=attn.soft_cap, segments=segments
    )
    o = o.reshape(b, t, n * hd)
    if gate is not None:
        o = o / (1 + np.exp(-gate))
    return linear(o, attn.o_proj.weight, attn.o_proj.bias)


CASES = {
    "mha": dict(num_heads=4, num_kv_heads=4),
    "gqa": dict(num_heads=4, num_kv_heads=2, qkv_bias=True),
    "mqa": dict(num_heads=4, num_kv_heads=1, out_bias=True),
    "window": dict(num_heads=4, num_kv_heads=2, window=5),
    "soft_cap_scale": dict(num_heads=2, num_kv_heads=1, head_dim=24, soft_cap=2.0, scale=0.5),
    "qk_norm": dict(num_heads=4, num_kv_heads=2, qk_norm=True),
    # Qwen3 / Gemma 3: per head, head_dim independent of dim / heads; Gemma's 1 + weight.
    "qk_norm_head_dim": dict(
        num_heads=4, num_kv_heads=1, head_dim=16, qk_norm="head", qk_norm_unit_offset=True
    ),
    # OLMo 2: one norm over all query (and all key) features.
    "qk_norm_projection": dict(num_heads=4, num_kv_heads=2, qk_norm="projection"),
    "llama3_rope": dict(
        num_heads=4,
        rope_theta=500000.0,
        rope_scaling=zl.RopeScaling("llama3", factor=8.0, original_max_position=32),
    ),
    "no_rope": dict(num_heads=4, rope_theta=None),
    # Qwen3.5's gated attention: a sigmoid output gate from q_proj, a quarter of each head rotated.
    "gated_partial_rope": dict(
        num_heads=4,
        num_kv_heads=2,
        head_dim=16,
        qk_norm=True,
        qk_norm_unit_offset=True,
        output_gate=True,
        rotary_dim=4,
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_attention_layer_matches_numpy(key, case):
    k1, k2, k3 = jax.random.split(key, 3)
    attn = _randomise(zl.Attention(32, key=k1, implementation="xla", **CASES[case]), k2)
    x = jax.random.normal(k3, (2, 13, 32))
    positions = jnp.broadcast_to(jnp.arange(13) + 3, (2, 13))
    got = eqx.filter_jit(zl.Attention.__call__)(attn, x, positions)
    np.testing.assert_allclose(got, _numpy_layer(attn, x, positions), rtol=1e-4, atol=1e-4)


def test_attention_layer_segments(key):
    k1, k2, k3, k4 = jax.random.split(key, 4)
    attn = _randomise(zl.Attention(32, 4, num_kv_heads=2, window=4, key=k1), k2)
    x = jax.random.normal(k3, (2, 12, 32))
    seg = jnp.sort(jax.random.randint(k4, (2, 12), 0, 3), axis=1)
    positions = jnp.broadcast_to(jnp.arange(12), (2, 12))
    got = eqx.filter_jit(zl.Attention.__call__)(attn, x, positions, seg)
    np.testing.assert_allclose(got, _numpy_layer(attn, x, positions, seg), rtol=1e-4, atol=1e-4)


def test_qk_norm_weights_have_the_shapes_and_names_of_their_mode(key):
    head = zl.Attention(32, 4, num_kv_heads=2, head_dim=16, qk_norm="head", key=key)
    whole = zl.Attention(32, 4, num_kv_heads=2, head_dim=16, qk_norm="projection", key=key)
    assert head.q_norm.weight.shape == head.k_norm.weight.shape == (16,)
    assert (whole.q_norm.weight.shape, whole.k_norm.weight.shape) == ((64,), (32,))
    names = zl.logical_axes(whole)
    assert (names.q_norm.weight.names, names.k_norm.weight.names) == (("heads",), ("kv_heads",))
    assert zl.logical_axes(head).q_norm.weight.names == ("head_dim",)
    with pytest.raises(ValueError, match="`qk_norm` must be"):
        zl.Attention(32, 4, qk_norm="layer", key=key)


def test_attention_rejects_bad_heads(key):
    with pytest.raises(ValueError, match="multiple of `num_kv_heads`"):
        zl.Attention(32, 4, num_kv_heads=3, key=key)
    with pytest.raises(ValueError, match="pass `head_dim`"):
        zl.Attention(30, 4, key=key)


@pytest.mark.parametrize(("window", "gated"), [(None, False), (3, False), (None, True)])
def test_decode_matches_full_pass(key, window, gated):
    """Writing the sequence into a cache in chunks of any size gives the full pass's outputs."""
    k1, k2, k3 = jax.random.split(key, 3)
    extra = dict(output_gate=True, rotary_dim=4) if gated else {}
    attn = zl.Attention(32, 4, num_kv_heads=2, window=window, soft_cap=3.0, key=k1, **extra)
    attn = _randomise(attn, k2)
    t, s = 9, 12
    x = jax.random.normal(k3, (2, t, 32))
    positions = jnp.broadcast_to(jnp.arange(t), (2, t))
    want = eqx.filter_jit(zl.Attention.__call__)(attn, x, positions)

    @eqx.filter_jit  # one program per chunk size: the start is traced
    def step(attn, x, positions, cache_k, cache_v, slot_pos, slot_valid, start):
        slot_pos = jax.lax.dynamic_update_slice(slot_pos, positions, (0, start))
        slot_valid = jax.lax.dynamic_update_slice(
            slot_valid, jnp.ones(positions.shape, bool), (0, start)
        )
        out, k_new, v_new = attn.decode(x, positions, cache_k, cache_v, slot_pos, slot_valid, start)
        cache_k = jax.lax.dynamic_update_slice(cache_k, k_new, (0, start, 0, 0))
        cache_v = jax.lax.dynamic_update_slice(cache_v, v_new, (0, start, 0, 0))
        return out, cache_k, cache_v, slot_pos, slot_valid

    xs, ps = np.asarray(x), np.asarray(positions)
    for chunks in [(9,), (4, 1, 1, 1, 1, 1), (1, 3, 2, 1, 2), (1, 1, 4, 3)]:
        state = (
            jnp.zeros((2, s, 2, 8)),
            jnp.zeros((2, s, 2, 8)),
            jnp.zeros((2, s), jnp.int32),
            jnp.zeros((2, s), bool),
        )
        outs, start = [], 0
        for c in chunks:
            sl = slice(start, start + c)  # sliced on the host, as a program per slice would be
            out, *state = step(attn, xs[:, sl], ps[:, sl], *state, jnp.int32(start))
            outs.append(out)
            start += c
        np.testing.assert_allclose(
            jnp.concatenate(outs, axis=1), want, rtol=1e-5, atol=1e-5, err_msg=f"chunks {chunks}"
        )


def test_decode_ignores_invalid_slots(key):
    """Garbage in unwritten or padded slots never reaches the output."""
    k1, k2, k3, k4 = jax.random.split(key, 4)
    attn = _randomise(zl.Attention(16, 2, key=k1), k2)
    x = jax.random.normal(k3, (1, 4, 16))
    positions = jnp.arange(4)[None]
    s = 8
    valid = jnp.zeros((1, s), bool).at[:, 2:6].set(True)  # two padding slots, then the tokens
    slot_pos = jnp.zeros((1, s), jnp.int32).at[:, 2:6].set(positions)
    outs = []
    decode = eqx.filter_jit(zl.Attention.decode)
    for noise in (0.0, 100.0):
        ck = noise * jax.random.normal(k4, (1, s, 2, 8))
        out, _, _ = decode(attn, x, positions, ck, ck, slot_pos, valid, jnp.int32(2))
        outs.append(out)
    np.testing.assert_allclose(outs[0], outs[1], rtol=1e-6, atol=1e-6)
    full = eqx.filter_jit(zl.Attention.__call__)(attn, x, positions)
    np.testing.assert_allclose(outs[0], full, rtol=1e-5, atol=1e-5)
    assert f64(outs[0]).std() > 0
