"""The dtype policy: float32 parameters, bfloat16 compute close to float32, grads in float32."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import zoo_layers as zl


def test_policy_resolves_and_validates():
    assert zl.DTypePolicy().param == jnp.float32
    assert zl.DTypePolicy(compute_dtype="bfloat16").compute == jnp.bfloat16
    # On this CPU backend the default compute dtype is float32.
    assert zl.default_compute_dtype() == (
        "float32" if jax.default_backend() == "cpu" else "bfloat16"
    )
    with pytest.raises(ValueError, match="`compute_dtype` must be one of"):
        zl.DTypePolicy(compute_dtype="int8")


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16", "float64"])
def test_check_float_dtype_passes_floating_dtypes(dtype):
    assert zl.check_float_dtype("param_dtype", dtype) == dtype
    assert jnp.issubdtype(jnp.dtype(dtype), jnp.floating)


@pytest.mark.parametrize("dtype", ["int8", "int32", "bool", "float8_e4m3fn", "fp32", ""])
def test_check_float_dtype_names_the_field(dtype):
    with pytest.raises(ValueError, match=f"`weights_dtype` must be one of .*got '{dtype}'"):
        zl.check_float_dtype("weights_dtype", dtype)


def test_bfloat16_compute_is_close_and_params_stay_float32(key):
    k1, k2 = jax.random.split(key)

    def make(phase, k):
        ka, km = jax.random.split(k)
        return zl.TransformerBlock(
            attn_norm=zl.RMSNorm(64),
            attn=zl.Attention(64, 4, num_kv_heads=2, key=ka, init_std=0.1),
            mlp_norm=zl.RMSNorm(64),
            mlp=zl.MLP(64, 128, activation="silu", gated=True, key=km, init_std=0.1),
        )

    stack = zl.LayerStack.init(make, 2, key=k1)
    x = jax.random.normal(k2, (2, 16, 64))
    positions = jnp.broadcast_to(jnp.arange(16), (2, 16))

    @eqx.filter_jit
    def run(s, x):
        return s(x, positions)

    full = run(stack, x)
    half = run(stack, x.astype(jnp.bfloat16))
    assert half.dtype == jnp.bfloat16
    err = np.abs(np.asarray(half, np.float32) - np.asarray(full))
    assert err.max() < 0.05 * np.abs(np.asarray(full)).max(), err.max()
    assert err.max() > 0  # it really computed in bfloat16

    grads = eqx.filter_jit(
        eqx.filter_grad(lambda s: jnp.sum(s(x.astype(jnp.bfloat16), positions).astype(jnp.float32)))
    )(stack)
    for p, g in zip(
        jax.tree_util.tree_leaves(stack), jax.tree_util.tree_leaves(grads), strict=True
    ):
        assert p.dtype == jnp.float32 and g.dtype == jnp.float32
