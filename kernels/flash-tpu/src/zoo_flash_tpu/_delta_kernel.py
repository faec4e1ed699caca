"""Backward preprocessing kernel: ``delta = rowsum(dO * O)`` per query, as lane-dense rows.

Done in a kernel rather than in XLA so that no float32 copy of ``O`` or ``dO`` is ever
materialised in HBM; it reads both blocks once and writes O(T) floats.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from . import _ops
from ._policy import LANES


def delta_kernel(o_ref: jax.Array, do_ref: jax.Array, delta_ref: jax.Array) -> None:
    """One ``(bq, Hp)`` block of ``O`` and ``dO`` -> a ``(1, bq)`` row of ``delta``."""
    prod = o_ref[...].astype(jnp.float32) * do_ref[...].astype(jnp.float32)
    col = jnp.sum(prod, axis=1, keepdims=True)
    delta_ref[...] = _ops.column_to_row(jnp.broadcast_to(col, (col.shape[0], LANES)))
