"""Interpret mode: the real splash kernels run on a CPU, for tests and machines without a TPU.

Splash's ``interpret=True`` is Pallas's generic interpret mode. Pallas TPU interpret mode
(``pltpu.InterpretParams``) cannot run it here: the batch is a ``vmap``, which adds a grid
axis, and the TPU interpreter (jax 0.10.2 and 0.12) pairs the grid with the kernel's
``dimension_semantics`` without counting that axis ("safe_zip() argument 1 has length 3 but
argument 0 has length 4"). The generic mode also runs under ``shard_map`` on several devices.
"""

from __future__ import annotations

import os

INTERPRET_VAR = "ZOO_SPLASH_INTERPRET"


def interpret_requested() -> bool:
    """Whether ``ZOO_SPLASH_INTERPRET=1`` asks for Pallas interpret mode."""
    return os.environ.get(INTERPRET_VAR, "").strip().lower() in ("1", "true", "yes")
