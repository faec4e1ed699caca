"""What several mesh tests share: a sharded train state and step, a small text corpus, its
run's losses, and the ``zoo`` command in a process that sees a given number of devices."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
from typing import Any

import equinox as eqx
import jax
import numpy as np

import zoo_models
import zoo_train
from zoo_train import OptimizerConfig, parallel

#: Plain SGD at lr 1: each update is minus the gradient.
SGD = OptimizerConfig(name="sgd", lr=1.0, momentum=0.0, weight_decay=0.0, clip_norm=None)
WORDS = ("def", "return", "class", "import", "alpha", "beta", "gamma", "self", "value", "(x)")


def state_and_step(
    config: zoo_models.ModelConfig,
    mesh: Any,
    *,
    loss_fn: Any = None,
    optimizer_config: OptimizerConfig = SGD,
    grad_accum: int = 1,
) -> tuple[Any, Any]:
    """A train state of ``config``'s model made directly into its shardings on ``mesh``, and
    the real train step on that mesh under the default rules."""
    rules = parallel.make_rules()

    def build():
        return zoo_models.build(config, key=jax.random.key(1))

    optimizer, schedule = zoo_train.make_optimizer(
        optimizer_config, 10, eqx.filter_eval_shape(build)
    )

    def fresh():
        return zoo_train.init_train_state(build(), optimizer, seed=0)

    shardings = parallel.state_shardings(eqx.filter_eval_shape(fresh), optimizer, mesh, rules)
    state = parallel.init_sharded(fresh, mesh=mesh, shardings=shardings)
    step = zoo_train.make_train_step(
        optimizer,
        loss_fn or zoo_train.make_lm_loss(),
        schedule,
        grad_accum=grad_accum,
        mesh=mesh,
        rules=rules,
    )
    return state, step


def corpus(directory: pathlib.Path, *, files: int = 10, seed: int | None = 0) -> pathlib.Path:
    """``files`` text files of 30 lines of 8 words each (``seed=None``: a fresh draw)."""
    rng = np.random.default_rng(seed)
    directory.mkdir(parents=True, exist_ok=True)
    for i in range(files):
        lines = "\n".join(" ".join(rng.choice(WORDS, 8)) for _ in range(30))
        (directory / f"doc{i}.txt").write_text(lines + "\n")
    return directory


def losses(run: pathlib.Path) -> dict[int, float]:
    """The train loss of each logged step of a run."""
    records = zoo_train.read_metrics(run / zoo_train.METRICS_FILE)
    return {r["step"]: r["loss"] for r in records if isinstance(r.get("loss"), float)}


def zoo_process(devices: int, *args: str, cwd: pathlib.Path | None = None):
    """``zoo *args`` in a process of its own that sees ``devices`` CPU devices."""
    env = {**os.environ, "XLA_FLAGS": f"--xla_force_host_platform_device_count={devices}"}
    code = "import sys; from zoo_train.cli import main; sys.exit(main())"
    return subprocess.run(
        [sys.executable, "-c", code, *args], cwd=cwd, env=env, capture_output=True, text=True,
        timeout=600,
    )  # fmt: skip
