"""Gated-delta-rule calls the contract rejects, with the word each error message must contain."""

from __future__ import annotations

import jax.numpy as jnp

from ...testing import BadInput


def bad_inputs() -> list[BadInput]:
    """The rejected calls (built lazily: they allocate small arrays)."""
    qk = jnp.zeros((2, 8, 2, 16), jnp.float32)
    v = jnp.zeros((2, 8, 4, 8), jnp.float32)
    g = jnp.zeros((2, 8, 4), jnp.float32)
    ids = jnp.zeros((2, 8), jnp.int32)
    state = jnp.zeros((2, 4, 16, 8), jnp.float32)
    args = (qk, qk, v, g, g)
    return [
        BadInput("rank-3-query", (qk[0], qk, v, g, g), {}, "query"),
        BadInput("key-shape", (qk, qk[..., :8], v, g, g), {}, "key"),
        BadInput("value-length", (qk, qk, v[:, :4], g, g), {}, "value"),
        BadInput(
            "heads-not-multiple", (qk, qk, v[:, :, :3], g[..., :3], g[..., :3]), {}, "multiple"
        ),
        BadInput("integer-query", (qk.astype(jnp.int32), qk, v, g, g), {}, "floating"),
        BadInput("mixed-dtypes", (qk, qk, v.astype(jnp.bfloat16), g, g), {}, "dtype"),
        BadInput("log-decay-shape", (qk, qk, v, g[..., :2], g), {}, "log_decay"),
        BadInput("beta-shape", (qk, qk, v, g, g[:, :4]), {}, "beta"),
        BadInput("segment-ids-shape", args, {"segment_ids": ids[:, :5]}, "segment_ids"),
        BadInput(
            "segment-ids-float", args, {"segment_ids": ids.astype(jnp.float32)}, "segment_ids"
        ),
        BadInput("initial-state-shape", args, {"initial_state": state[:, :2]}, "initial_state"),
        BadInput("scale-zero", args, {"scale": 0.0}, "scale"),
        BadInput("normalize-not-bool", args, {"normalize_qk": "yes"}, "normalize_qk"),
        BadInput(
            "unknown-implementation", args, {"implementation": "no_such_kernel"}, "known kernels"
        ),
    ]
