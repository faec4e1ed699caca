"""Every process of a multi-process run reaching the same verdict on a checkpoint.

A restore reads shards on every process; if one process fails a phase and the others went on,
they would wait forever in the next collective. Each phase therefore ends with every process
agreeing it succeeded, and only process 0 moves files, the others waiting for it.
"""

from __future__ import annotations

import jax
import numpy as np
from jax.experimental import multihost_utils


def agreed(error: Exception | None) -> None:
    """Raise unless every process got through a phase: ``error`` (this process's), or a note
    that another process failed. Every process reaches the same verdict."""
    ok = error is None
    if jax.process_count() > 1:
        ok = bool(np.all(multihost_utils.process_allgather(np.asarray(ok))))
    if error is not None:
        raise error
    if not ok:
        raise ValueError("another process could not read it")
