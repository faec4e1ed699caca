"""A training run as its own process, for the kill -9 and signal tests:
``python kill_run.py OUT STEPS``.

Prints one JSON line when done and writes the final arrays to ``OUT/final.npz``.
"""

from __future__ import annotations

import json
import sys

import equinox as eqx
import jax
import numpy as np
from tiny_lm import loaders, make_model

import zoo_train


def main(out: str, steps: int) -> None:
    config = zoo_train.TrainConfig(
        steps=steps,
        batch_size=4,
        grad_accum=2,
        optimizer=zoo_train.OptimizerConfig(lr=3e-3, warmup_steps=2),
        log_every=1,
        eval_every=0,
        checkpoint_every=3,
        keep=2,
        progress=False,
        plot=False,
    )
    train, _ = loaders(0)
    try:
        result = zoo_train.train(make_model(0, dim=64), train, config=config, out=out)
    except zoo_train.StoppedBySignalError as stopped:  # SIGTERM / Ctrl-C: saved, then out
        print(json.dumps({"stopped": stopped.step, "saved": stopped.saved}), flush=True)
        sys.exit(128 + stopped.signum)
    leaves = jax.tree.leaves(eqx.filter(result.state, eqx.is_array))
    np.savez(f"{out}/final.npz", *[np.asarray(x) for x in leaves])
    print(
        json.dumps(
            {
                "resumed_from": result.resumed_from,
                "step": result.step,
                "skipped": result.skipped_checkpoints,
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
