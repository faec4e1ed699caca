"""The language-model loss through the fused cross-entropy contract equals the plain one.

``ZOO_CROSS_ENTROPY=logits`` (the reference: the whole logits, then float32 cross entropy) is
the unfused loss as it was; ``fused_xla`` runs here with tiles of a few tokens, so every batch
crosses several tiles and a padded last one. Float32 on CPU, so both agree to float32
rounding: the loss, every auxiliary sum and every gradient, for an untied head, a tied head
with Gemma's soft cap and a mixture of experts (its router losses beside), and the train step
over several steps.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import equinox as eqx
import jax
import numpy as np
import pytest

import zoo_attention
import zoo_models
import zoo_train
from zoo_attention.cross_entropy import ENV_VAR
from zoo_attention.cross_entropy._fused_policy import TILE_ENV
from zoo_data import PackedLoader
from zoo_train import OptimizerConfig
from zoo_train.eval_harness._scoring import token_scores
from zoo_train.preference._logps import token_logps

FAMILIES = {
    "untied": zoo_models.get("llama-tiny").replace(vocab_size=67, n_layers=2),
    "tied-soft-cap": zoo_models.get("gemma2-tiny").replace(vocab_size=67, n_layers=2),
    "moe": zoo_models.get("mixtral-tiny").replace(vocab_size=67, n_layers=2),
}


@contextlib.contextmanager
def _kernel(name: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[zoo_attention.ResolutionLog]:
    with monkeypatch.context() as m, zoo_attention.recording() as log:
        m.setenv(ENV_VAR, name)
        m.setenv(TILE_ENV, "24")
        yield log


def _batch(rows: int = 4, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    docs = [rng.integers(0, 66, rng.integers(5, 30)).astype(np.int32) for _ in range(40)]
    return PackedLoader(docs, seq_len=20, seed=seed).next_batch(rows)


def _loss_and_grads(config, kernel, monkeypatch, batch):
    model = zoo_models.build(config, key=jax.random.key(3))
    loss_fn = zoo_train.make_lm_loss(z_loss=1e-2, router_z_loss=1e-3)
    with _kernel(kernel, monkeypatch) as log:
        (loss, aux), grads = eqx.filter_jit(eqx.filter_value_and_grad(loss_fn, has_aux=True))(
            model, batch, jax.random.key(0)
        )
    assert [r.kernel for r in log.cross_entropy] == [kernel]
    return jax.device_get((loss, aux, grads))


def _assert_trees_close(got, want, rtol: float) -> None:
    for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
        g, w = np.asarray(g, np.float64), np.asarray(w, np.float64)
        assert np.max(np.abs(g - w)) <= rtol * max(np.max(np.abs(w)), 1e-30), (g, w)


@pytest.mark.parametrize(
    "family",
    [
        "moe",
        "tied-soft-cap",
        # an untied head as llama's: [moe]'s head is untied too (its router losses beside)
        pytest.param("untied", marks=pytest.mark.full),
    ],
)
def test_fused_loss_and_gradients_equal_the_plain_ones(family, monkeypatch) -> None:
    batch = _batch(seed=np.random.default_rng().integers(1 << 30))
    config = FAMILIES[family]
    loss, aux, grads = _loss_and_grads(config, "fused_xla", monkeypatch, batch)
    want_loss, want_aux, want_grads = _loss_and_grads(config, "logits", monkeypatch, batch)
    np.testing.assert_allclose(loss, want_loss, rtol=1e-6)
    assert sorted(aux) == sorted(want_aux)
    for key in want_aux:
        np.testing.assert_allclose(aux[key], want_aux[key], rtol=1e-6, atol=1e-7, err_msg=key)
    _assert_trees_close(grads, want_grads, rtol=2e-5)


def _train(kernel: str, monkeypatch, batches) -> tuple[list[float], object]:
    config = FAMILIES["tied-soft-cap"]
    model = zoo_models.build(config, key=jax.random.key(1))
    opt = OptimizerConfig(name="sgd", lr=0.5, momentum=0.0, weight_decay=0.0, clip_norm=None)
    optimizer, schedule = zoo_train.make_optimizer(opt, 10, model)
    state = zoo_train.init_train_state(model, optimizer, seed=0)
    step = zoo_train.make_train_step(optimizer, zoo_train.make_lm_loss(), schedule)
    losses = []
    with _kernel(kernel, monkeypatch):
        for batch in batches:
            state, metrics = step(batch, state)
            losses.append(float(metrics["loss"]))
    return losses, jax.device_get(eqx.filter(state.params, eqx.is_inexact_array))


def test_train_steps_with_the_fused_loss_equal_the_plain_ones(monkeypatch) -> None:
    batches = [_batch(seed=s) for s in range(4)]
    losses, params = _train("fused_xla", monkeypatch, batches)
    want_losses, want_params = _train("logits", monkeypatch, batches)
    np.testing.assert_allclose(losses, want_losses, rtol=1e-6)
    _assert_trees_close(params, want_params, rtol=1e-5)


def test_preference_and_eval_scores_go_through_the_contract(monkeypatch) -> None:
    config = FAMILIES["tied-soft-cap"]
    model = zoo_models.build(config, key=jax.random.key(2))
    batch = _batch()
    out = {}
    for kernel in ("fused_xla", "logits"):
        # New functions each time: the kernel is resolved when a function is traced.
        with _kernel(kernel, monkeypatch) as log:
            logps = eqx.filter_jit(lambda m, b: token_logps(m, b))(model, batch)
            scores, greedy = eqx.filter_jit(lambda m, b: token_scores(m, b))(model, batch)
        assert {r.kernel for r in log.cross_entropy} == {kernel}
        out[kernel] = jax.device_get((logps, scores, greedy))
    logits = np.asarray(model(batch["input_ids"]), np.float64)
    want_greedy = logits.argmax(-1) == batch["targets"]
    np.testing.assert_array_equal(out["fused_xla"][2], want_greedy)
    for got, want in zip(out["fused_xla"][:2], out["logits"][:2], strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
