"""Trains GPT-2 (the training benchmark's shapes) with a profile window, for ``bench.profile_step``.

``python -m bench.profile_worker '<json>'`` with ``out``, ``arch`` (as in
``bench.training``), ``batch``, ``seq_len``, ``steps`` and ``profile`` ([start, end]).
"""

from __future__ import annotations

import json
import sys

import numpy as np


def main() -> None:
    config = json.loads(sys.argv[1])
    import jax

    import zoo_models
    import zoo_train
    from zoo_train.data import PackedLoader

    from .training_zoo import zoo_config

    arch = config["arch"]
    model_config = zoo_config(arch)
    rng = np.random.default_rng(0)
    rows = config["batch"] * config["steps"] * 2
    docs = [rng.integers(0, arch["vocab_size"], config["seq_len"] + 1) for _ in range(rows)]
    train_config = zoo_train.TrainConfig(
        steps=config["steps"],
        batch_size=config["batch"],
        optimizer=zoo_train.OptimizerConfig(lr=3e-4, warmup_steps=0),
        log_every=1,
        eval_every=0,
        checkpoint_every=config["steps"],
        plot=False,
        progress=False,
        profile=tuple(config["profile"]),
    )
    trainer = zoo_train.Trainer(
        train_config,
        lambda: zoo_models.build(model_config, key=jax.random.key(0)),
        None,
        config["out"],
    )
    trainer.train(PackedLoader(docs, seq_len=config["seq_len"], seed=0))


if __name__ == "__main__":
    main()
