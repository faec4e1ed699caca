"""``ZOO_DELTANET_TPU_INTERPRET=1``: run the kernels on a non-TPU backend in Pallas interpret
mode."""

from __future__ import annotations

import os
from typing import Any

import jax
from jax.experimental.pallas import tpu as pltpu

INTERPRET_VAR = "ZOO_DELTANET_TPU_INTERPRET"


def interpret_requested() -> bool:
    """Whether ``ZOO_DELTANET_TPU_INTERPRET`` asks for interpret mode (``1``, or ``tpu`` for
    Pallas TPU interpret mode)."""
    return os.environ.get(INTERPRET_VAR, "").strip().lower() in ("1", "true", "yes", "tpu")


def interpret_mode() -> Any:
    """The interpret mode for a call traced here: generic interpret mode (``True``: the grid
    runs as one XLA loop, fast on a CPU), or with ``ZOO_DELTANET_TPU_INTERPRET=tpu`` Pallas TPU
    interpret mode with uninitialised memory poisoned with NaNs, on one device (inside a
    ``shard_map`` over several devices it deadlocks in jax 0.10, so the generic mode runs
    there)."""
    if os.environ.get(INTERPRET_VAR, "").strip().lower() != "tpu":
        return True
    mesh = jax.sharding.get_abstract_mesh()
    if not mesh.empty and mesh.size > 1:
        return True
    return pltpu.InterpretParams(uninitialized_memory="nan")
