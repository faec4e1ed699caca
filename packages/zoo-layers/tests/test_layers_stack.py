"""The layer stack, scanned and unrolled: equal to a Python loop over its layers, remat-transparent,
traced once when scanned, one gradient concatenate per parameter when unrolled."""

import dataclasses
import time

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import zoo_layers as zl

jax.config.update("jax_default_matmul_precision", "highest")

D, H = 32, 4


def make_block(window_for_phase=(None,), pre_norms=True):
    def make(phase, key):
        k1, k2 = jax.random.split(key)
        return zl.TransformerBlock(
            attn_norm=zl.RMSNorm(D) if pre_norms else None,
            attn=zl.Attention(D, H, num_kv_heads=2, window=window_for_phase[phase], key=k1),
            mlp_norm=zl.RMSNorm(D) if pre_norms else None,
            mlp=zl.MLP(D, 64, activation="silu", gated=True, key=k2),
            post_attn_norm=zl.RMSNorm(D, unit_offset=True),
            post_mlp_norm=zl.RMSNorm(D, unit_offset=True),
            dropout=zl.Dropout(0.1),
        )

    return make


@pytest.fixture(scope="module")
def stacks():
    """A 4-layer stack per scan period, built once for the module (scanned)."""
    key = jax.random.key(7)
    return {
        1: zl.LayerStack.init(make_block(), 4, scan=True, key=key),
        2: zl.LayerStack.init(make_block((3, None)), 4, period=2, scan=True, key=key),
        # Gemma 3's shape in small: 5 layers repeating a pattern of 3, so two make a tail.
        "tail": zl.LayerStack.init(make_block((3, 2, None)), 5, period=3, scan=True, key=key),
    }


def _with_scan(stack, scan):
    return dataclasses.replace(stack, scan=scan)


@eqx.filter_jit
def run(stack, x, positions, key=None):
    return stack(x, positions, key=key)


def _inputs(key, t=10):
    x = jax.random.normal(key, (2, t, D))
    return x, jnp.broadcast_to(jnp.arange(t), (2, t))


def _loop(layers, x, positions, key=None):
    keys = [None] * len(layers) if key is None else list(jax.random.split(key, len(layers)))
    for layer, k in zip(layers, keys, strict=True):
        x = layer(x, positions, key=k)
    return x


@pytest.mark.parametrize("scan", [True, False], ids=["scan", "unrolled"])
@pytest.mark.parametrize("windows", [(None,), (3, None)], ids=["period1", "period2-local-global"])
def test_stack_equals_python_loop(key, windows, scan, stacks):
    k2 = key
    stack = _with_scan(stacks[len(windows)], scan)
    layers = stack.layers()
    # Each layer has its own parameters, and phases keep their static configuration.
    assert not np.allclose(layers[0].attn.q_proj.weight, layers[len(windows)].attn.q_proj.weight)
    assert [layer.attn.window for layer in layers] == [windows[i % len(windows)] for i in range(4)]
    x, positions = _inputs(k2)
    got = run(stack, x, positions)
    want = eqx.filter_jit(_loop)(layers, x, positions)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    restacked = zl.LayerStack.from_layers(layers, period=len(windows), scan=scan)
    assert jax.tree_util.tree_structure(restacked) == jax.tree_util.tree_structure(stack)
    for a, b in zip(
        jax.tree_util.tree_leaves(restacked), jax.tree_util.tree_leaves(stack), strict=True
    ):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("scan", [True, False], ids=["scan", "unrolled"])
def test_dropout_uses_a_key_per_layer(key, scan, stacks):
    k2, k3 = jax.random.split(key)
    stack = _with_scan(stacks[1], scan)
    x, positions = _inputs(k2)
    a, b = run(stack, x, positions, k3), run(stack, x, positions, jax.random.split(k3)[0])
    plain = run(stack, x, positions)
    assert not np.allclose(a, b) and not np.allclose(a, plain)
    np.testing.assert_array_equal(a, run(stack, x, positions, k3))


@pytest.mark.parametrize(
    "scan",
    [
        True,
        # Remat wraps the same step for both loops ([scan]); the unrolled loop's gradients are
        # test_stack_grads_equal_loop_grads[unrolled]'s.
        pytest.param(False, marks=pytest.mark.full),
    ],
    ids=["scan", "unrolled"],
)
def test_remat_gives_same_values_and_grads(key, scan, stacks):
    k2 = key
    stack = _with_scan(stacks[2], scan)
    remat = dataclasses.replace(stack, remat=True)
    x, positions = _inputs(k2)

    @eqx.filter_jit
    def loss_and_grad(s, x):
        return eqx.filter_value_and_grad(lambda s, x: jnp.sum(jnp.sin(s(x, positions))))(s, x)

    (l1, g1), (l2, g2) = loss_and_grad(stack, x), loss_and_grad(remat, x)
    np.testing.assert_allclose(l1, l2, rtol=1e-5)
    for a, b in zip(jax.tree_util.tree_leaves(g1), jax.tree_util.tree_leaves(g2), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5 * float(np.abs(b).max()))
    # The checkpointed body really is in the program.
    jaxpr = str(
        jax.make_jaxpr(lambda s: eqx.filter_grad(lambda s: jnp.sum(s(x, positions)))(s))(remat)
    )
    assert "checkpoint" in jaxpr or "remat" in jaxpr


@pytest.mark.parametrize(
    "scan",
    [
        # Scanned gradients against the loop's: test_a_period_that_does_not_divide_the_depth_
        # leaves_a_tail[scan], for the scanned groups and the tail.
        pytest.param(True, marks=pytest.mark.full),
        False,
    ],
    ids=["scan", "unrolled"],
)
def test_stack_grads_equal_loop_grads(key, scan, stacks):
    k2 = key
    stack = _with_scan(stacks[1], scan)
    x, positions = _inputs(k2)
    f_scan = lambda s: jnp.sum(jnp.sin(s(x, positions)))
    f_loop = lambda layers: jnp.sum(jnp.sin(_loop(layers, x, positions)))
    g_scan = eqx.filter_jit(eqx.filter_grad(f_scan))(stack)
    g_loop = eqx.filter_jit(eqx.filter_grad(f_loop))(stack.layers())
    for i, g in enumerate(g_loop):
        want = jax.tree_util.tree_leaves(g)
        got = jax.tree_util.tree_leaves(g_scan.layer(i))
        for a, b in zip(got, want, strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5 * float(np.abs(b).max()))


def _is_abstract_array(x) -> bool:
    return isinstance(x, jax.Array | jax.ShapeDtypeStruct)


def test_block_body_is_traced_once_whatever_the_depth(key, monkeypatch):
    traces = []
    original = zl.TransformerBlock.apply  # what the stack calls for each block

    def counting(self, *args, **kwargs):
        traces.append(1)  # a Python side effect: runs once per trace, never per layer at run time
        return original(self, *args, **kwargs)

    monkeypatch.setattr(zl.TransformerBlock, "apply", counting)
    x, positions = _inputs(key, t=8)
    times = {}
    for n in (2, 8, 32):
        # Abstract parameters are enough to trace and compile; nothing is initialised.
        shape = eqx.filter_eval_shape(
            lambda k, n=n: zl.LayerStack.init(make_block((3, None)), n, period=2, scan=True, key=k),
            key,
        )
        params, static = eqx.partition(shape, _is_abstract_array)
        traces.clear()
        start = time.perf_counter()
        jax.jit(lambda p, x, s=static: eqx.combine(p, s)(x, positions)).lower(params, x).compile()
        times[n] = time.perf_counter() - start
        assert len(traces) == 2, f"{n} layers traced the block {len(traces)} times"  # one per phase
    print("trace+compile seconds by depth:", {n: round(t, 3) for n, t in times.items()})


def test_scan_default_is_unrolled_on_cpu_and_scanned_elsewhere(key, monkeypatch):
    stack = zl.LayerStack.init(make_block(), 2, key=key)
    assert stack.scan is None
    assert stack.scans is (jax.default_backend() != "cpu")
    monkeypatch.setattr(jax, "default_backend", lambda: "tpu")
    assert stack.scans is True and zl.scan_by_default() is True
    monkeypatch.setattr(jax, "default_backend", lambda: "cpu")
    assert stack.scans is False and zl.scan_by_default() is False


def test_unrolled_gradient_of_each_stacked_parameter_is_one_concatenate(key, stacks):
    # Indexing layer i out of the stack would give each layer a zero-padded full-size gradient
    # (L pads and L-1 additions per parameter); the unrolled stack must build it in one piece.
    stack = _with_scan(stacks[1], False)
    x, positions = _inputs(key)
    jaxpr = jax.make_jaxpr(eqx.filter_grad(lambda s: jnp.sum(s(x, positions))))(stack).jaxpr
    prims = [e.primitive.name for e in jaxpr.eqns]
    params = [leaf for leaf in jax.tree_util.tree_leaves(stack) if eqx.is_array(leaf)]
    stacked = [
        e.outvars[0].aval.shape
        for e in jaxpr.eqns
        if e.primitive.name == "concatenate" and e.params["dimension"] == 0
    ]
    assert "pad" not in prims
    assert sorted(stacked) == sorted(p.shape for p in params)


def test_bad_stack_shapes_are_clear_errors(key, stacks):
    with pytest.raises(ValueError, match="at least `period`"):
        zl.LayerStack.init(make_block((3, None)), 1, period=2, key=key)
    with pytest.raises(ValueError, match="out of range"):
        stacks[1].layer(4)
    with pytest.raises(ValueError, match="fewer than `period` 2"):
        zl.LayerStack.from_layers(stacks[1].layers()[:1], period=2)


@pytest.mark.parametrize("scan", [True, False], ids=["scan", "unrolled"])
def test_a_period_that_does_not_divide_the_depth_leaves_a_tail(key, scan, stacks):
    stack = _with_scan(stacks["tail"], scan)
    assert stack.groups == 1 and len(stack.tail) == 2
    layers = stack.layers()
    # Layers 3 and 4 are the tail and keep phases 0 and 1's static configuration.
    assert [layer.attn.window for layer in layers] == [3, 2, None, 3, 2]
    assert [zl.layer_slot(i, 5, 3) for i in range(5)] == [
        ("blocks.0", 0), ("blocks.1", 0), ("blocks.2", 0), ("tail.0", 0), ("tail.1", 0)
    ]  # fmt: skip
    np.testing.assert_array_equal(layers[3].attn.q_proj.weight, stack.tail[0].attn.q_proj.weight[0])
    x, positions = _inputs(key)
    k_drop = jax.random.key(3)
    want = eqx.filter_jit(_loop)(layers, x, positions)
    np.testing.assert_allclose(run(stack, x, positions), want, rtol=1e-5, atol=1e-5)
    # Dropout keys: the same per-layer keys as a loop over the layers.
    drop = run(stack, x, positions, k_drop)
    assert not np.allclose(drop, want)
    if scan:
        # Gradients reach the tail, rematerialised as the scanned groups are.
        remat = dataclasses.replace(stack, remat=True)
        loss = lambda s: jnp.sum(jnp.sin(s(x, positions)))
        grads = eqx.filter_jit(eqx.filter_grad(loss))(remat)
        g_loop = eqx.filter_jit(
            eqx.filter_grad(lambda ls: jnp.sum(jnp.sin(_loop(ls, x, positions))))
        )(layers)
        for i in (0, 3, 4):
            for a, b in zip(
                jax.tree_util.tree_leaves(grads.layer(i)),
                jax.tree_util.tree_leaves(g_loop[i]),
                strict=True,
            ):
                np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5 * float(np.abs(b).max()))
    restacked = zl.LayerStack.from_layers(layers, period=3, scan=scan)
    assert jax.tree_util.tree_structure(restacked) == jax.tree_util.tree_structure(stack)
    names = zl.logical_axes(stack)
    assert names.tail[1].attn.q_proj.weight.names == ("layers", "heads", "embed")


def test_tail_decode_matches_the_full_pass(key, stacks):
    stack = stacks["tail"]
    t, s = 7, 9
    x, positions = _inputs(key, t)
    want = run(stack, x, positions)
    cache_k = jnp.zeros((5, 2, s, 2, D // H))
    cache_v = jnp.zeros_like(cache_k)
    slot_pos = jnp.zeros((2, s), jnp.int32).at[:, :t].set(positions)
    valid = jnp.zeros((2, s), bool).at[:, :t].set(True)
    out, k_new, v_new = eqx.filter_jit(zl.LayerStack.decode)(
        stack, x, positions, cache_k, cache_v, slot_pos, valid, jnp.int32(0)
    )
    assert k_new.shape == v_new.shape == (5, 2, t, 2, D // H)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)


def test_a_block_without_pre_norms_normalises_each_branch_after_it(key):
    """OLMo 2's block: ``x + post_attn_norm(attn(x))``, then the same for the MLP."""
    block = _randomised(make_block(pre_norms=False)(0, key), jax.random.key(5))
    x, positions = _inputs(jax.random.key(6))
    h = x + block.post_attn_norm(block.attn(x, positions))
    want = h + block.post_mlp_norm(block.mlp(h))
    np.testing.assert_allclose(
        eqx.filter_jit(lambda b, x: b(x, positions))(block, x), want, rtol=1e-5, atol=1e-5
    )


def _randomised(module, key):
    leaves, tree = jax.tree_util.tree_flatten(module)
    keys = jax.random.split(key, len(leaves))
    leaves = [
        0.3 * jax.random.normal(k, x.shape, x.dtype) if eqx.is_inexact_array(x) else x
        for k, x in zip(keys, leaves, strict=True)
    ]
    return jax.tree_util.tree_unflatten(tree, leaves)
