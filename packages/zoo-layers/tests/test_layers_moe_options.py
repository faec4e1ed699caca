"""The mixture-of-experts options of gpt-oss (router and expert biases, the clamped SwiGLU) and
DeepSeek-V3 (sigmoid scores, a correction bias for the selection only, group-limited top-k, a
routed scaling factor, shared experts) against float64 numpy written from their definitions,
and the dropless layer's gradients against the dense layer's; aux-loss-free balancing and the
arrays an optimizer owns."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from layers_reference import f64, silu

import zoo_layers as zl
from zoo_layers.moe import balanced_correction_bias
from zoo_layers.testing import dense_moe

jax.config.update("jax_default_matmul_precision", "highest")

D, HIDDEN, E = 16, 24, 8


def _noisy(module, key):
    """Every floating array of ``module`` moved, so no bias sits at zero."""
    leaves, treedef = jax.tree.flatten(module)
    keys = jax.random.split(key, len(leaves))
    moved = [
        x + 0.3 * jax.random.normal(k, x.shape, x.dtype) if eqx.is_inexact_array(x) else x
        for x, k in zip(leaves, keys, strict=True)
    ]
    return jax.tree.unflatten(treedef, moved)


def _gpt_oss(key):
    moe = zl.MoE(D, HIDDEN, E, 2, router_bias=True, expert_bias=True, swiglu_limit=0.8,
                 swiglu_alpha=1.702, key=key)  # fmt: skip
    return _noisy(moe, jax.random.fold_in(key, 1))


def _deepseek(key):
    moe = zl.MoE(D, HIDDEN, E, 2, scoring="sigmoid", correction_bias=True, groups=4,
                 group_top_k=2, routed_scale=2.5, shared_hidden=12, key=key)  # fmt: skip
    return _noisy(moe, jax.random.fold_in(key, 1))


def _numpy_moe(moe, x):
    """The layer from its definition, token by token, in float64."""
    w = lambda a: None if a is None else f64(a)
    router_w, router_b = w(moe.router.weight), w(moe.router.bias)
    gate, up, down = w(moe.gate_proj), w(moe.up_proj), w(moe.down_proj)
    gb, ub, db, cb = w(moe.gate_bias), w(moe.up_bias), w(moe.down_bias), w(moe.correction_bias)
    out = []
    for token in f64(x).reshape(-1, D):
        logits = router_w @ token + (0 if router_b is None else router_b)
        if moe.scoring == "softmax":
            chosen = np.argsort(-logits)[: moe.top_k]
            weights = np.exp(logits[chosen] - logits[chosen].max())
            weights = weights / weights.sum()  # softmax of the chosen logits
        else:
            scores = 1 / (1 + np.exp(-logits))
            choice = scores + cb
            groups = choice.reshape(moe.groups, -1)
            best = np.sort(groups, axis=1)[:, -2:].sum(1)
            kept = np.argsort(-best)[: moe.group_top_k]
            allowed = np.isin(np.arange(E) // (E // moe.groups), kept)
            chosen = np.argsort(-np.where(allowed, choice, -np.inf))[: moe.top_k]
            weights = scores[chosen] / scores[chosen].sum() * moe.routed_scale
        y = np.zeros(D)
        for e, weight in zip(chosen, weights, strict=True):
            g = token @ gate[e] + (0 if gb is None else gb[e])
            u = token @ up[e] + (0 if ub is None else ub[e])
            if moe.swiglu_limit is None:
                h = silu(g) * u
            else:
                g = np.minimum(g, moe.swiglu_limit)
                u = np.clip(u, -moe.swiglu_limit, moe.swiglu_limit)
                h = (u + 1) * g / (1 + np.exp(-moe.swiglu_alpha * g))
            y += weight * (h @ down[e] + (0 if db is None else db[e]))
        if moe.shared is not None:
            s = moe.shared
            y += (silu(f64(s.gate.weight) @ token) * (f64(s.up.weight) @ token)) @ f64(
                s.down.weight
            ).T
        out.append(y)
    return np.stack(out).reshape(x.shape)


@pytest.mark.parametrize("make", [_gpt_oss, _deepseek], ids=["gpt-oss", "deepseek-v3"])
def test_the_options_equal_their_definitions_and_the_dense_gradients(make, key):
    moe = make(key)
    x = jax.random.normal(jax.random.fold_in(key, 2), (2, 9, D))
    cot = jax.random.normal(jax.random.fold_in(key, 3), x.shape)

    @eqx.filter_jit  # one compiled program for the forward pass and both gradients
    def outputs(moe, x, cot):
        def grad(fn):
            return eqx.filter_grad(lambda mx: jnp.sum(fn(*mx) * cot))((moe, x))

        return moe(x)[0], [grad(lambda m, x: m(x)[0]), grad(dense_moe)]

    got, grads = outputs(moe, x, cot)
    np.testing.assert_allclose(got, _numpy_moe(moe, x), rtol=1e-5, atol=1e-5)
    for a, b in zip(*map(jax.tree.leaves, grads), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    if moe.correction_bias is not None:  # it steers the selection; no gradient reaches it
        assert not np.any(np.asarray(grads[0][0].correction_bias))


def test_the_correction_bias_steers_the_selection_not_the_weights(key):
    moe = _deepseek(key)
    x = jax.random.normal(jax.random.fold_in(key, 2), (1, 16, D))
    favoured = eqx.tree_at(lambda m: m.correction_bias, moe, moe.correction_bias.at[3].add(10.0))
    run = eqx.filter_jit(lambda m, x: m(x))  # one compile: the two layers differ only in values
    (out, stats), (plain, _) = run(favoured, x), run(moe, x)
    assert float(stats.counts[3]) == 16  # every token now takes expert 3
    assert not np.allclose(out, plain)


def test_aux_loss_free_balancing_moves_each_bias_towards_an_even_load():
    bias = jnp.asarray([[0.1, -0.2, 0.0, 0.3]], jnp.float32)
    counts = jnp.asarray([[10.0, 2.0, 4.0, 0.0]])  # mean 4
    moved = balanced_correction_bias(bias, counts, 0.001)
    np.testing.assert_allclose(moved, [[0.099, -0.199, 0.0, 0.301]], atol=1e-7)


def test_an_optimizer_owns_every_float_array_but_the_correction_bias(key):
    moe = _deepseek(key)
    mask = zl.trainable_mask(moe)
    assert mask.correction_bias is False
    assert mask.router.weight is True and mask.shared.gate.weight is True
    abstract = eqx.filter_eval_shape(lambda: moe)
    assert zl.trainable_mask(abstract).correction_bias is False
    params, frozen = eqx.partition(moe, mask)
    assert params.correction_bias is None and frozen.correction_bias is not None
