"""The per-chunk math of the kernels against plain linear algebra: the triangular inverse
against numpy's, one chunk against the contract's chunked form, and the kernel's place in the
default order."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from zoo_attention import linear
from zoo_deltanet_tpu import KERNEL, chunk_step, invert_unit_lower, shape_problem, vmem_bytes


@pytest.mark.parametrize("size", [1, 5, 16, 37, 64])
def test_the_triangular_inverse_is_numpys(size):
    rng = np.random.default_rng()
    # Entries of a gated DeltaNet's system: beta * <k_i, k_j> * decay, at most 1 in size.
    a = np.tril(rng.uniform(-1, 1, (size, size)), -1).astype(np.float32)
    got = np.asarray(invert_unit_lower(jnp.asarray(a)), np.float64)
    want = np.linalg.inv(np.eye(size) + a.astype(np.float64))
    np.testing.assert_allclose(got, want, atol=2e-5 * max(1.0, np.abs(want).max()))


def test_the_inverse_is_exact_where_a_power_series_would_cancel():
    # All ones below the diagonal: the inverse is 1 on the diagonal and -1 below it, while the
    # powers of the matrix grow like binomial coefficients (about 1e17 at 64 rows).
    a = jnp.tril(jnp.ones((64, 64), jnp.float32), -1)
    want = np.eye(64) - np.eye(64, k=-1)
    np.testing.assert_array_equal(np.asarray(invert_unit_lower(a)), want)


def test_one_chunk_is_the_chunked_rule_on_one_chunk():
    rng = np.random.default_rng()
    c, dk, dv = 64, 32, 24
    q, k = (linear.l2_normalize(jnp.asarray(rng.standard_normal((c, dk)))) for _ in range(2))
    v = jnp.asarray(rng.standard_normal((c, dv)), jnp.float32)
    g = jnp.asarray(-rng.random(c), jnp.float32)
    beta = jnp.asarray(rng.random(c), jnp.float32)
    state = jnp.asarray(rng.standard_normal((dk, dv)), jnp.float32)
    ones = jnp.ones((1, c), jnp.float32)
    out, after = chunk_step(
        state, q, k, v, beta[None], jnp.cumsum(g)[None], ones, ones, jnp.ones((1, 1)), None
    )

    def contract_layout(x):
        return x[None, :, None]

    want_out, want_after = linear.chunked_rule(
        *(contract_layout(x) for x in (q, k, v, g, beta)), None, state[None, None], c
    )
    np.testing.assert_allclose(out, want_out[0, :, 0], atol=2e-5, rtol=2e-5)
    np.testing.assert_allclose(after, want_after[0, 0], atol=2e-5, rtol=2e-5)


def test_serves_on_a_tpu_and_says_why_not_elsewhere(monkeypatch):
    qk = jax.ShapeDtypeStruct((1, 4096, 16, 128), jnp.bfloat16)
    v = jax.ShapeDtypeStruct((1, 4096, 32, 128), jnp.bfloat16)
    g = jax.ShapeDtypeStruct((1, 4096, 32), jnp.float32)
    spec, _, _ = linear.make_spec(qk, qk, v, g, g, platform="tpu", device_kind="TPU v5 lite")
    assert KERNEL.check(spec) is None
    monkeypatch.delenv("ZOO_DELTANET_TPU_INTERPRET")
    cpu = linear.make_spec(qk, qk, v, g, g, platform="cpu")[0]
    assert "needs a TPU" in KERNEL.check(cpu)
    assert [k.name for k in linear.default_order("tpu")][:1] == ["deltanet_tpu"]
    assert "deltanet_tpu" not in [k.name for k in linear.default_order("cpu")]
    assert vmem_bytes(4096, 128, 128) < 16 * 2**20
    assert "VMEM" in shape_problem(4096, 1024, 1024)
