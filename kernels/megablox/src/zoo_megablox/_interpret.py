"""``ZOO_MEGABLOX_INTERPRET=1``: run the kernel on a non-TPU backend in Pallas interpret mode."""

from __future__ import annotations

import os
from typing import Any

import jax
from jax.experimental.pallas import tpu as pltpu

INTERPRET_VAR = "ZOO_MEGABLOX_INTERPRET"


def interpret_requested() -> bool:
    """Whether ``ZOO_MEGABLOX_INTERPRET=1`` asks for Pallas interpret mode."""
    return os.environ.get(INTERPRET_VAR, "").strip().lower() in ("1", "true", "yes")


def interpret_params_here() -> Any:
    """The interpret mode for a call traced here: Pallas TPU interpret mode with uninitialised
    memory poisoned with NaNs on one device; inside a ``shard_map`` over several devices, where
    TPU interpret mode deadlocks in jax 0.10 (its callbacks copy to CPU device 0 from inside
    the running multi-device computation), the generic interpret mode (``True``)."""
    mesh = jax.sharding.get_abstract_mesh()
    if not mesh.empty and mesh.size > 1:
        return True
    return pltpu.InterpretParams(uninitialized_memory="nan")
