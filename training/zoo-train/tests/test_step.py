"""The train step against plain autodiff and numpy: loss, accumulation, guard, optimizers."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from tiny_lm import loaders, make_model

import zoo_train
from zoo_train import OptimizerConfig


def _model(seed=0):
    return make_model(seed)


@eqx.filter_jit
def _logits(model, batch):
    return model(batch["input_ids"], positions=batch["positions"], segment_ids=batch["segment_ids"])


def _np_log_softmax(x):
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def test_lm_loss_matches_numpy_with_z_loss():
    model = _model(1)
    batch = loaders(1)[0].next_batch(4)
    loss_sum, aux = eqx.filter_jit(zoo_train.make_lm_loss(z_loss=1e-2))(
        model, batch, jax.random.key(0)
    )
    logits = np.asarray(_logits(model, batch), np.float64)
    logp = _np_log_softmax(logits)
    ce = -np.take_along_axis(logp, batch["targets"][..., None], -1)[..., 0]
    log_z = np.log(np.exp(logits).sum(-1))
    m = batch["loss_mask"]
    np.testing.assert_allclose(float(aux["ce"]), (ce * m).sum(), rtol=1e-5)
    np.testing.assert_allclose(float(aux["z_loss"]), 1e-2 * (log_z**2 * m).sum(), rtol=1e-5)
    np.testing.assert_allclose(
        float(loss_sum), (ce * m).sum() + 1e-2 * (log_z**2 * m).sum(), rtol=1e-5
    )
    assert float(aux["weight"]) == m.sum() > 0


def test_token_losses_gradient_matches_numpy_softmax_minus_onehot():
    # token_losses has its own backward pass (softmax · (g_ce + g_logz) − onehot · g_ce); check
    # it against the closed form in float64 numpy for random cotangents of both outputs.
    rng = np.random.default_rng()
    logits = rng.standard_normal((3, 5, 11)).astype(np.float32) * 3
    targets = rng.integers(0, 11, (3, 5))
    g_ce, g_log_z = rng.standard_normal((2, 3, 5)).astype(np.float32)
    (ce, log_z), vjp = jax.vjp(lambda x: zoo_train.token_losses(x, jnp.asarray(targets)), logits)
    (grad,) = vjp((jnp.asarray(g_ce), jnp.asarray(g_log_z)))
    x = logits.astype(np.float64)
    want_log_z = np.log(np.exp(x).sum(-1))
    probs = np.exp(x - want_log_z[..., None])
    onehot = np.eye(11)[targets]
    np.testing.assert_allclose(log_z, want_log_z, rtol=1e-6)
    np.testing.assert_allclose(
        ce, want_log_z - np.take_along_axis(x, targets[..., None], -1)[..., 0], rtol=1e-5, atol=1e-6
    )
    want = probs * (g_ce + g_log_z)[..., None] - onehot * g_ce[..., None]
    np.testing.assert_allclose(grad, want, rtol=1e-5, atol=1e-6)


def _reference_grad(model, batch):
    """Plain autodiff of the token-mean cross entropy over the whole batch."""

    def mean_ce(params):
        mdl = eqx.combine(params, eqx.filter(model, eqx.is_inexact_array, inverse=True))
        logits = mdl(
            batch["input_ids"], positions=batch["positions"], segment_ids=batch["segment_ids"]
        )
        logp = jax.nn.log_softmax(logits, axis=-1)
        nll = -jnp.take_along_axis(logp, batch["targets"][..., None], -1)[..., 0]
        return jnp.sum(nll * batch["loss_mask"]) / jnp.sum(batch["loss_mask"])

    return jax.jit(jax.grad(mean_ce))(eqx.filter(model, eqx.is_inexact_array))


@pytest.mark.parametrize(
    "grad_accum",
    # four micro-batches through the same scan as [2]'s two
    [2, pytest.param(4, marks=pytest.mark.full)],
)
def test_grad_accumulation_equals_large_batch_gradient(grad_accum):
    model = _model(2)
    batch = loaders(2)[0].next_batch(8)
    # Micro-batches must count different numbers of tokens for the check to mean anything.
    counts = batch["loss_mask"].reshape(grad_accum, -1).sum(1)
    assert len(set(counts.tolist())) > 1
    want = _reference_grad(model, batch)
    params, frozen = eqx.partition(model, eqx.is_inexact_array)
    loss_fn = zoo_train.make_lm_loss()
    _, aux, got = eqx.filter_jit(zoo_train.accumulate_gradients)(
        loss_fn, params, frozen, batch, jax.random.key(0), grad_accum
    )
    got = jax.tree.map(lambda g: g / aux["weight"], got)
    for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=2e-4, atol=2e-6)

    # The full step with plain SGD (lr 1, no clipping or decay) applies exactly -gradient.
    cfg = OptimizerConfig(
        name="sgd", lr=1.0, momentum=0.0, schedule="constant", weight_decay=0.0, clip_norm=None
    )
    opt, sched = zoo_train.make_optimizer(cfg, 10, params)
    state = zoo_train.init_train_state(model, opt)
    step = zoo_train.make_train_step(opt, loss_fn, sched, grad_accum=grad_accum)
    new_state, metrics = step(batch, state)
    delta = jax.tree.map(lambda new, old: new - old, new_state.params, params)
    for d, w in zip(jax.tree.leaves(delta), jax.tree.leaves(want), strict=True):
        np.testing.assert_allclose(np.asarray(d), -np.asarray(w), rtol=2e-3, atol=1e-6)
    assert bool(metrics["finite"]) and int(new_state.step) == 1


def test_step_guards_nonfinite_updates():
    model = _model(3)
    batch = loaders(3)[0].next_batch(4)
    params = eqx.filter(model, eqx.is_inexact_array)
    base = zoo_train.make_lm_loss()

    def nan_loss(m, b, k):
        s, aux = base(m, b, k)
        return s * jnp.nan, aux

    opt, sched = zoo_train.make_optimizer(OptimizerConfig(), 10, params)
    state = zoo_train.init_train_state(model, opt)
    before = jax.tree.map(np.asarray, (state.params, state.opt_state))
    new_state, metrics = zoo_train.make_train_step(opt, nan_loss, sched)(batch, state)
    assert not bool(metrics["finite"])
    after = jax.tree.map(np.asarray, (new_state.params, new_state.opt_state))
    for a, b in zip(jax.tree.leaves(before), jax.tree.leaves(after), strict=True):
        np.testing.assert_array_equal(a, b)
    assert int(new_state.step) == 1 and int(new_state.skipped) == 1


def test_step_donates_the_state():
    model = _model(4)
    batch = loaders(4)[0].next_batch(2)
    params = eqx.filter(model, eqx.is_inexact_array)
    opt, sched = zoo_train.make_optimizer(OptimizerConfig(), 10, params)
    state = zoo_train.init_train_state(
        jax.tree.map(lambda x: x + 0 if eqx.is_array(x) else x, model), opt
    )
    old = state.params.embed
    zoo_train.make_train_step(opt, zoo_train.make_lm_loss(), sched)(batch, state)
    assert old.is_deleted()


def test_default_decay_mask():
    mask = zoo_train.default_decay_mask(eqx.filter(_model(), eqx.is_inexact_array))
    assert mask.wqkv and mask.w1 and mask.unembed
    assert not mask.embed and not mask.norm and not mask.b1
    # AdamW applies decay exactly on the masked leaves: zero gradient, so only decay moves them.
    params = eqx.filter(_model(), eqx.is_inexact_array)
    opt, _ = zoo_train.make_optimizer(
        OptimizerConfig(lr=0.1, weight_decay=0.5, schedule="constant", clip_norm=None), 10, params
    )
    updates, _ = jax.jit(opt.update)(jax.tree.map(jnp.zeros_like, params), opt.init(params), params)
    for name in ("wqkv", "embed", "norm", "b1"):
        u, p = np.asarray(getattr(updates, name)), np.asarray(getattr(params, name))
        np.testing.assert_allclose(u, -0.1 * 0.5 * p if getattr(mask, name) else 0 * p, rtol=1e-6)


@pytest.mark.parametrize("kind", ["cosine", "linear", "constant"])
def test_schedules_match_closed_form(kind):
    cfg = OptimizerConfig(lr=2.0, warmup_steps=10, schedule=kind, min_lr_ratio=0.25)
    sched = zoo_train.make_schedule(cfg, 110)
    for s in [0, 5, 10, 30, 60, 109, 110]:
        if s < 10:
            want = 2.0 * s / 10
        else:
            frac = (s - 10) / 100
            want = {
                "cosine": 2.0 * (0.25 + 0.75 * 0.5 * (1 + np.cos(np.pi * frac))),
                "linear": 2.0 * (1 - 0.75 * frac),
                "constant": 2.0,
            }[kind]
        np.testing.assert_allclose(float(sched(s)), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", ["sgd", "adafactor"])
def test_other_optimizers_reduce_the_loss(name):
    model = _model(5)
    data = loaders(5)[0]
    batch = data.next_batch(8)
    params = eqx.filter(model, eqx.is_inexact_array)
    lr = 0.5 if name == "sgd" else 0.05
    opt, sched = zoo_train.make_optimizer(
        OptimizerConfig(name=name, lr=lr, schedule="constant"), 50, params
    )
    state = zoo_train.init_train_state(model, opt)
    step = zoo_train.make_train_step(opt, zoo_train.make_lm_loss(), sched)
    losses = []
    for _ in range(15):
        state, m = step(batch, state)
        losses.append(float(m["loss"]))
    assert losses[-1] < losses[0] - 0.2


def test_bfloat16_compute_keeps_float32_master_weights():
    model = _model(6)
    batch = loaders(6)[0].next_batch(4)
    params = eqx.filter(model, eqx.is_inexact_array)
    opt, sched = zoo_train.make_optimizer(OptimizerConfig(), 10, params)
    state = zoo_train.init_train_state(model, opt)
    loss16 = zoo_train.make_lm_loss(compute_dtype="bfloat16")
    loss32 = zoo_train.make_lm_loss()
    s16, a16 = eqx.filter_jit(loss16)(model, batch, jax.random.key(0))
    s32, a32 = eqx.filter_jit(loss32)(model, batch, jax.random.key(0))
    assert s16.dtype == jnp.float32
    np.testing.assert_allclose(float(s16 / a16["weight"]), float(s32 / a32["weight"]), rtol=3e-2)
    new_state, _ = zoo_train.make_train_step(opt, loss16, sched)(batch, state)
    assert all(x.dtype == jnp.float32 for x in jax.tree.leaves(new_state.params))
    assert all(
        x.dtype == jnp.float32
        for x in jax.tree.leaves(new_state.opt_state)
        if jnp.issubdtype(x.dtype, jnp.floating)
    )


def test_trainable_filter_freezes_the_rest():
    model = _model(7)
    batch = loaders(7)[0].next_batch(4)
    only_head = jax.tree.map(lambda _: False, model)
    only_head = eqx.tree_at(lambda m: m.unembed, only_head, True)
    params = eqx.filter(model, only_head)
    opt, sched = zoo_train.make_optimizer(OptimizerConfig(lr=1e-2), 10, params)
    state = zoo_train.init_train_state(model, opt, trainable=only_head)
    assert len(jax.tree.leaves(state.params)) == 1
    new_state, _ = zoo_train.make_train_step(opt, zoo_train.make_lm_loss(), sched)(batch, state)
    new_model = new_state.model
    np.testing.assert_array_equal(np.asarray(new_model.embed), np.asarray(model.embed))
    assert not np.array_equal(np.asarray(new_model.unembed), np.asarray(model.unembed))


def test_config_rejects_bad_values():
    with pytest.raises(ValueError, match="optimizer"):
        OptimizerConfig(name="adam")
    with pytest.raises(ValueError, match="grad_accum"):
        zoo_train.TrainConfig(grad_accum=0)
    with pytest.raises(ValueError, match="on_nonfinite"):
        zoo_train.TrainConfig(on_nonfinite="ignore")
    cfg = zoo_train.TrainConfig(optimizer=OptimizerConfig(lr=1e-3))
    assert zoo_train.TrainConfig.from_dict(cfg.to_dict()) == cfg
    assert optax is not None


def test_bfloat16_parameters_keep_the_state_dtypes():
    # Float32 gradients promoted the AdamW moments of bfloat16 parameters to float32, so a run
    # with bfloat16 parameters saved a state that no command could restore.
    model = jax.tree.map(
        lambda x: x.astype(jnp.bfloat16) if eqx.is_inexact_array(x) else x, _model(2)
    )
    opt, sched = zoo_train.make_optimizer(
        OptimizerConfig(lr=1e-2, warmup_steps=0), 3, eqx.filter(model, eqx.is_inexact_array)
    )
    state = zoo_train.init_train_state(model, opt)
    before = [x.dtype for x in jax.tree.leaves(eqx.filter(state, eqx.is_array))]
    state, metrics = zoo_train.make_train_step(opt, zoo_train.make_lm_loss(), sched)(
        loaders(1)[0].next_batch(4), state
    )
    assert bool(metrics["finite"])
    assert [x.dtype for x in jax.tree.leaves(eqx.filter(state, eqx.is_array))] == before
