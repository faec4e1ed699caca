"""A Mixtral-shaped mixture-of-experts layer (zoo-layers' MoE: 8 experts, top 2, renormalised,
gated SiLU experts) through megablox, in Pallas TPU interpret mode, against the same layer
through ragged_dot: equal outputs and gradients (router, experts' weights and inputs), for
routings that leave experts without tokens."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import zoo_attention
import zoo_layers as zl
from zoo_layers.moe import route

D, HIDDEN, E, TOP_K = 64, 224, 8, 2  # Mixtral's 8 experts, top 2, hidden/width 3.5


@pytest.fixture(autouse=True)
def _interpret(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("ZOO_MEGABLOX_INTERPRET", "1")
    monkeypatch.delenv(zoo_attention.grouped.ENV_VAR, raising=False)
    with jax.default_matmul_precision("highest"):
        yield


def _moe(key: jax.Array, cold: tuple[int, ...], implementation: str) -> zl.MoE:
    moe = zl.MoE(
        D,
        HIDDEN,
        E,
        TOP_K,
        normalize=True,
        activation="silu",
        implementation=implementation,
        key=key,
    )
    # For positive inputs, a cold expert scores low for every token: it receives none.
    shift = jnp.zeros((E, 1)).at[jnp.array(cold, int)].set(-4.0)
    return eqx.tree_at(lambda m: m.router.weight, moe, moe.router.weight + shift)


@pytest.mark.parametrize("tokens", [(2, 24), (1, 5)], ids=["48-tokens", "5-tokens"])
def test_megablox_equals_ragged_dot_forward_and_gradients(tokens):
    seed = int(np.random.default_rng().integers(2**31))
    k_moe, k_x, k_cot = jax.random.split(jax.random.key(seed), 3)
    moe = _moe(k_moe, (1, 6), "ragged_dot")
    x = jnp.abs(jax.random.normal(k_x, (*tokens, D)))
    _, experts = route(x.reshape(-1, D) @ moe.router.weight.T, TOP_K, normalize=True)
    assert not np.isin([1, 6], np.asarray(experts)).any(), "the cold experts got tokens"
    cot = jax.random.normal(k_cot, x.shape)

    def run(implementation: str):
        layer = _moe(k_moe, (1, 6), implementation)  # the same weights, another kernel
        loss = lambda mx: jnp.sum(mx[0](mx[1])[0] * cot)
        return eqx.filter_jit(lambda mx: (mx[0](mx[1])[0], eqx.filter_grad(loss)(mx)))((layer, x))

    with zoo_attention.recording() as log:
        got, got_grads = run("megablox")
    want, want_grads = run("ragged_dot")
    assert {r.kernel for r in log.grouped_matmul} == {"megablox"}
    # Float32 sums: an element's error follows the size of the terms summed, which is the
    # array's scale, not the element's own (a gradient entry near zero). Measured over seeds:
    # at most 7e-7 of the array's largest entry.
    scale = lambda a: 1e-5 * float(np.abs(a).max())
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=scale(want), err_msg=f"seed {seed}")
    leaves = zip(jax.tree.leaves(got_grads), jax.tree.leaves(want_grads), strict=True)
    for a, b in leaves:
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=scale(b), err_msg=f"seed {seed}")
