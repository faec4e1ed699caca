"""The training loop on a token store, unchanged: it trains, evaluates and resumes from the row
position alone (reading stores is zoo-data's, tested there)."""

from __future__ import annotations

import dataclasses

import numpy as np
from cli_helpers import write_corpus
from tiny_lm import make_model

import zoo_train
from zoo_data import StoreLoader, prepare_store

T = 16


def test_the_training_loop_runs_on_a_store_unchanged(tmp_path):
    seed = int(np.random.default_rng().integers(99))
    path = tmp_path / "store"
    prepare_store(write_corpus(tmp_path / "in", seed=seed), path, eval_fraction=0.2, progress=False)
    loader = StoreLoader(path, seq_len=T, seed=0)
    config = zoo_train.TrainConfig(
        steps=4,
        batch_size=4,
        log_every=2,
        eval_every=4,
        checkpoint_every=4,
        progress=False,
        plot=False,
        eval_batches=2,
    )
    result = zoo_train.train(
        make_model(0, vocab=257), loader, config=config, out=tmp_path / "run", eval_data=loader
    )
    assert result.step == 4 and np.isfinite(result.last_eval["eval_loss"])
    # Resuming needs the row position alone; the run's data identity is the store's fingerprint.
    resumed = zoo_train.train(
        make_model(0, vocab=257),
        StoreLoader(path, seq_len=T, seed=0),
        config=dataclasses.replace(config, steps=6),
        out=tmp_path / "run",
        eval_data=loader,
    )
    assert resumed.resumed_from == 4 and resumed.step == 6
