"""A non-finite loss names its cause before blaming the learning rate: a batch with rows that
have nothing to train on, parameters already non-finite; and a batch of ids outside any
vocabulary never reaches a step."""

from __future__ import annotations

import equinox as eqx
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from tiny_lm import loaders, make_model

import zoo_train
from zoo_train import OptimizerConfig, TrainConfig


def _config(**kw) -> TrainConfig:
    base = dict(
        steps=6,
        batch_size=4,
        optimizer=OptimizerConfig(lr=3e-3, warmup_steps=1),
        log_every=1,
        eval_every=0,
        checkpoint_every=2,
        keep=3,
        progress=False,
        plot=False,
    )
    return TrainConfig(**{**base, **kw})


class _Changed:
    """A loader whose batch ``bad`` (1-based) is changed by ``change(batch)``."""

    def __init__(self, inner, bad: int, change) -> None:
        self.inner, self.bad, self.change, self.calls = inner, bad, change, 0

    def next_batch(self, n):
        batch = self.inner.next_batch(n)
        self.calls += 1
        return self.change(batch) if self.calls == self.bad else batch

    def __getattr__(self, name):
        return getattr(self.inner, name)


def _per_row_loss(model, batch, key):
    """The mean loss of each row, summed over rows: a row with no loss token divides by 0."""
    logits = model(
        batch["input_ids"], positions=batch["positions"], segment_ids=batch["segment_ids"]
    )
    ce = optax.softmax_cross_entropy_with_integer_labels(logits, batch["targets"])
    mask = batch["loss_mask"]
    per_row = jnp.sum(ce * mask, axis=1) / jnp.sum(mask, axis=1)
    return jnp.sum(per_row), {"weight": jnp.asarray(mask.shape[0], jnp.float32)}


def test_a_batch_with_rows_to_train_on_none_is_named(tmp_path):
    rng = np.random.default_rng()
    bad = int(rng.integers(3, 6))
    empty = int(rng.integers(1, 4))  # of the 4 rows

    def emptied(batch):
        rows = rng.choice(4, empty, replace=False)
        batch["loss_mask"] = batch["loss_mask"].copy()
        batch["loss_mask"][rows] = 0.0
        return batch

    train, _ = loaders(int(rng.integers(1000)))
    with pytest.raises(zoo_train.NonFiniteLossError) as info:
        zoo_train.train(
            make_model(0),
            _Changed(train, bad, emptied),
            config=_config(),
            out=tmp_path,
            loss_fn=_per_row_loss,
        )
    text = str(info.value)
    assert info.value.step == bad
    assert f"because {empty} of its batch's 4 rows have no token to train on" in text
    assert "learning rate" not in text
    assert info.value.last_checkpoint == (bad - 1) // 2 * 2  # the last good one is kept


def test_parameters_already_non_finite_are_named(tmp_path):
    rng = np.random.default_rng()
    model = make_model(int(rng.integers(1000)))
    where = tuple(int(rng.integers(n)) for n in model.w1.shape)
    model = eqx.tree_at(lambda m: m.w1, model, model.w1.at[where].set(jnp.nan))
    train, _ = loaders(int(rng.integers(1000)))
    with pytest.raises(zoo_train.NonFiniteLossError) as info:
        zoo_train.train(model, train, config=_config(steps=2), out=tmp_path)
    text = str(info.value)
    assert info.value.step == 1 and "because the parameters were already non-finite" in text
    assert "learning rate" not in text


def test_ids_outside_any_vocabulary_never_reach_a_step(tmp_path):
    rng = np.random.default_rng()
    bad = int(rng.integers(2, 5))

    def negative(batch):
        batch["input_ids"] = batch["input_ids"].copy()
        batch["input_ids"][rng.integers(4), rng.integers(16)] = -int(rng.integers(1, 100))
        return batch

    train, _ = loaders(int(rng.integers(1000)))
    with pytest.raises(ValueError, match=rf"The batch of step {bad} from the training data holds"):
        zoo_train.train(
            make_model(0), _Changed(train, bad, negative), config=_config(), out=tmp_path
        )
    trained = [r["step"] for r in zoo_train.read_metrics(tmp_path / "metrics.jsonl") if "loss" in r]
    assert max(trained, default=0) < bad
