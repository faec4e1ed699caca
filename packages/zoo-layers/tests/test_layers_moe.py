"""The mixture-of-experts layer: grouped matmuls against float64 numpy, the dropless layer against
the dense reference (every expert on every token), forward and gradients, for routings that
leave experts without tokens; the router's statistics against the formulas; stacks mixing dense
and expert layers."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import zoo_attention
import zoo_layers as zl
from zoo_attention import grouped
from zoo_layers.moe import RouterStats, route
from zoo_layers.testing import dense_moe

jax.config.update("jax_default_matmul_precision", "highest")

IMPLEMENTATIONS = ["tiled", "ragged_dot"]
D, HIDDEN, E, K = 16, 24, 8, 2


def _grouped_reference(lhs, rhs, sizes):
    lhs, rhs = np.float64(lhs), np.float64(rhs)
    out = np.zeros((lhs.shape[0], rhs.shape[2]))
    start = 0
    for g, n in enumerate(np.asarray(sizes)):
        out[start : start + n] = lhs[start : start + n] @ rhs[g]
        start += n
    return out


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
@pytest.mark.parametrize("sizes", [(0, 5, 0, 30, 1, 0), (3, 0, 0, 0, 0, 20), (0, 0, 7, 0, 2, 0)])
def test_grouped_matmul_equals_numpy_with_empty_groups_and_rows_past_them(
    implementation, sizes, key
):
    m, k, n = 40, 8, 12
    lhs = jax.random.normal(key, (m, k))
    rhs = jax.random.normal(jax.random.fold_in(key, 1), (len(sizes), k, n))
    got = zl.grouped_matmul(lhs, rhs, jnp.array(sizes), implementation=implementation)
    np.testing.assert_allclose(got, _grouped_reference(lhs, rhs, sizes), rtol=1e-5, atol=1e-5)
    # Gradients: against plain autodiff of the reference written with masks.
    group = np.repeat(np.arange(len(sizes) + 1), (*sizes, m - sum(sizes)))
    onehot = jnp.asarray(group[:, None] == np.arange(len(sizes)), jnp.float32)
    reference = lambda a, b: jnp.einsum("mg,mk,gkn->mn", onehot, a, b)
    cot = jax.random.normal(jax.random.fold_in(key, 2), (m, n))
    f = lambda fn: jax.grad(lambda a, b: jnp.sum(fn(a, b) * cot), argnums=(0, 1))(lhs, rhs)
    got_g = f(lambda a, b: zl.grouped_matmul(a, b, jnp.array(sizes), implementation=implementation))
    for a, b in zip(got_g, f(reference), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


def test_grouped_matmul_refuses_bad_shapes_and_names():
    lhs, rhs = jnp.zeros((4, 3)), jnp.zeros((2, 3, 5))
    with pytest.raises(
        ValueError, match=r"lhs \[M, K\] and rhs \[G, K, N\].*\(4, 3\).*\(2, 4, 5\)"
    ):
        zl.grouped_matmul(lhs, jnp.zeros((2, 4, 5)), jnp.zeros(2, jnp.int32))
    with pytest.raises(ValueError, match=r"group_sizes.*\[2\]"):
        zl.grouped_matmul(lhs, rhs, jnp.zeros(3, jnp.int32))
    with pytest.raises(ValueError, match=r"unknown grouped matmul implementation 'nope'.*tiled"):
        zl.grouped_matmul(lhs, rhs, jnp.zeros(2, jnp.int32), implementation="nope")


def test_tiled_is_a_contract_kernel_the_cpu_default_and_recorded():
    lhs, rhs, sizes = jnp.ones((6, 3)), jnp.ones((2, 3, 5)), jnp.array([1, 3])
    with zoo_attention.recording() as log:
        zl.grouped_matmul(lhs, rhs, sizes)
    (res,) = log.grouped_matmul
    assert (res.kernel, res.source, res.kind) == ("tiled", "default", "grouped_matmul")
    assert res.version == grouped.get_kernel("tiled").version
    assert [k.name for k in grouped.default_order("cpu")][-2:] == ["tiled", "ragged_dot"]
    assert "tiled" not in [k.name for k in grouped.default_order("tpu")]


def test_the_old_registry_names_still_work_and_say_what_replaces_them(monkeypatch):
    calls = []

    def counting(lhs, rhs, sizes):
        calls.append(lhs.shape)
        return zl.moe.tiled_grouped_matmul(lhs, rhs, sizes)

    others = [k for name, k in grouped.kernels().items() if name not in ("tiled", "ragged_dot")]
    for other in others:  # an installed kernel package must not outrank the one registered here
        grouped.unregister_kernel(other.name)
    try:
        with pytest.warns(DeprecationWarning, match="zoo_attention.grouped.GroupedMatmulKernel"):
            impl = zl.GroupedMatmul("counting", counting, ("cpu",))
        with pytest.warns(DeprecationWarning, match="register_kernel"):
            zl.register_grouped_matmul(impl)
        with pytest.warns(DeprecationWarning, match="zoo_attention.grouped.resolve"):
            resolve = zl.moe.resolve_grouped_matmul
        assert resolve().name == "counting"  # preferred over the built-ins on its platform
        monkeypatch.setenv(zl.moe.ENV_VAR, "ragged_dot")  # the switch overrides the order
        assert resolve().name == "ragged_dot"
        monkeypatch.delenv(zl.moe.ENV_VAR)
        zl.grouped_matmul(jnp.ones((4, 3)), jnp.ones((2, 3, 5)), jnp.array([1, 3]))
        assert calls == [(4, 3)]
        with pytest.warns(DeprecationWarning, match="grouped.kernels"):
            listed = zl.moe.grouped_matmuls()
        assert {"counting", "tiled", "ragged_dot"} <= set(listed)
        with pytest.warns(DeprecationWarning, match="ENTRY_POINT_GROUP"):
            assert zl.moe.ENTRY_POINT_GROUP == "zoo.grouped_matmul"
    finally:
        grouped.unregister_kernel("counting")
        for other in others:
            grouped.register_kernel(other, replace=True)


def _moe(key, *, normalize=True, top_k=K, hot=(), cold=(), implementation=None):
    moe = zl.MoE(D, HIDDEN, E, top_k, normalize=normalize, implementation=implementation, key=key)
    # For positive inputs, a hot expert scores high for every token (it takes every token), a
    # cold one low (it takes none).
    shift = jnp.zeros((E, 1)).at[jnp.array(hot, int)].set(3.0).at[jnp.array(cold, int)].set(-3.0)
    return eqx.tree_at(lambda m: m.router.weight, moe, moe.router.weight + shift)


def _routings(key, implementation):
    """(moe, x) pairs whose routings leave experts without tokens: few tokens, a hot expert, and
    many tokens at top-1 without normalisation."""
    k1, k2, k3, kx = jax.random.split(key, 4)
    kw = {"implementation": implementation}
    positive = jnp.abs(jax.random.normal(kx, (3, 11, D)))
    return {
        "three-tokens": (_moe(k1, **kw), jax.random.normal(kx, (1, 3, D))),
        "hot-expert": (_moe(k2, hot=(5,), **kw), positive[:2, :9]),
        "top1-unnormalised-cold": (
            _moe(k3, normalize=False, top_k=1, cold=(0, 3, 6), **kw),
            positive,
        ),
    }


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
@pytest.mark.parametrize("case", ["three-tokens", "hot-expert", "top1-unnormalised-cold"])
def test_dropless_layer_equals_the_dense_reference_forward_and_gradients(implementation, case, key):
    moe, x = _routings(key, implementation)[case]
    _, experts = route(x.reshape(-1, D) @ moe.router.weight.T, moe.top_k, normalize=True)
    assert len(np.unique(np.asarray(experts))) < E  # some expert receives no token
    cot = jax.random.normal(jax.random.fold_in(key, 9), x.shape)

    @eqx.filter_jit
    def value_and_grads(moe, x):
        def run(fn):
            loss = lambda mx: jnp.sum(fn(*mx) * cot)
            return fn(moe, x), eqx.filter_grad(loss)((moe, x))

        return run(lambda m, x: m(x)[0]), run(dense_moe)

    (got, got_grads), (want, want_grads) = value_and_grads(moe, x)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    for a, b in zip(jax.tree.leaves(got_grads), jax.tree.leaves(want_grads), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def test_router_statistics_follow_the_definitions(key):
    moe = _moe(key)
    x = jax.random.normal(jax.random.fold_in(key, 1), (2, 7, D))
    mask = np.ones((2, 7), np.float32)
    mask[1, 4:] = 0.0  # padding is not counted
    _, stats = eqx.filter_jit(lambda m, x, mask: m(x, mask, keep_logits=True))(moe, x, mask)
    logits = np.float64(stats.logits).reshape(-1, E)
    keep = mask.reshape(-1) > 0
    probs = np.exp(logits - logits.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    top = np.argsort(-probs, axis=-1)[:, :K]
    counts = np.zeros(E)
    for row in top[keep]:
        counts[row] += 1
    n = keep.sum()
    np.testing.assert_allclose(stats.counts, counts)
    np.testing.assert_allclose(stats.tokens, n)
    # Switch Transformer's loss as transformers computes it: E * sum_e f_e * P_e.
    want_aux = E * np.sum(counts / n * probs[keep].sum(0) / n)
    np.testing.assert_allclose(stats.aux_loss(), want_aux, rtol=1e-5)
    lse = np.log(np.exp(logits).sum(-1))
    np.testing.assert_allclose(stats.z_loss(), np.mean(lse[keep] ** 2), rtol=1e-5)
    np.testing.assert_allclose(stats.load(), counts / counts.sum(), rtol=1e-6)


def test_moe_refuses_top_k_outside_the_experts(key):
    with pytest.raises(
        ValueError, match=r"`top_k` must be between 1 and the number of experts \(4\)"
    ):
        zl.MoE(D, HIDDEN, 4, 5, key=key)


def test_a_stack_mixing_dense_and_expert_layers_returns_stats_in_layer_order(key):
    """Five layers repeating (dense, expert): a scanned period of two and a tail."""

    def make(phase, k):
        k1, k2 = jax.random.split(k)
        mlp = zl.MLP(D, HIDDEN, activation="silu", gated=True, key=k2) if phase == 0 else _moe(k2)
        return zl.TransformerBlock(
            attn_norm=zl.RMSNorm(D),
            attn=zl.Attention(D, 4, num_kv_heads=2, implementation="xla", key=k1),
            mlp_norm=zl.RMSNorm(D),
            mlp=mlp,
        )

    x = jax.random.normal(key, (2, 6, D))
    positions = jnp.broadcast_to(jnp.arange(6), (2, 6))

    @eqx.filter_jit
    def loop(layers, h):
        want = []
        for layer in layers:
            h, s = layer.apply(h, positions, keep_logits=True)
            if s is not None:
                want.append(s)
        return h, want

    for scan in (True, False):
        stack = zl.LayerStack.init(make, 5, period=2, scan=scan, key=jax.random.fold_in(key, 1))
        out, stats = eqx.filter_jit(lambda s, x: s.apply(x, positions, keep_logits=True))(stack, x)
        h, want = loop(stack.layers(), x)
        assert len(want) == 2 and stats.counts.shape == (2, E)
        np.testing.assert_allclose(out, h, rtol=1e-5, atol=1e-5)
        for i, s in enumerate(want):
            np.testing.assert_allclose(stats.logits[i], s.logits, rtol=1e-5, atol=1e-5)
            np.testing.assert_array_equal(stats.counts[i], s.counts)
        fields = [(s.counts, s.probs, s.z, s.tokens) for s in want]
        stacked = RouterStats(*(jnp.stack(a) for a in zip(*fields, strict=True)))
        np.testing.assert_allclose(stats.aux_loss(), stacked.aux_loss(), rtol=1e-6)


def test_a_gated_shared_expert_adds_to_the_routed_experts(key):
    # Qwen3.5-MoE: moe(x) = routed(x) + sigmoid(x g^T) * mlp(x), every token through the MLP.
    k1, k2, kx = jax.random.split(key, 3)
    moe = zl.MoE(D, HIDDEN, E, K, shared_hidden=20, shared_gate=True, key=k1)
    moe = eqx.tree_at(lambda m: m.shared_gate.weight, moe, jax.random.normal(k2, (1, D)))
    x = jax.random.normal(kx, (2, 5, D))
    got = np.asarray(moe(x)[0], np.float64)
    s = moe.shared
    f = lambda a: np.asarray(a, np.float64)
    xs = f(x)
    gate_logit = xs @ f(moe.shared_gate.weight).T
    silu = lambda a: a / (1 + np.exp(-a))
    mlp = (silu(xs @ f(s.gate.weight).T) * (xs @ f(s.up.weight).T)) @ f(s.down.weight).T
    routed = dense_moe(eqx.tree_at(lambda m: m.shared, moe, None), x)  # without the shared MLP
    want = f(routed) + mlp / (1 + np.exp(-gate_logit))
    np.testing.assert_allclose(f(dense_moe(moe, x)), want, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    names = zl.logical_axes(moe)
    assert names.shared.up.weight.names == ("mlp", "embed")
    assert names.shared_gate.weight.names == (None, "embed")
