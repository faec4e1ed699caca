"""Calls the contract rejects, with the word each error message must contain."""

from __future__ import annotations

import dataclasses
from typing import Any

import jax.numpy as jnp


@dataclasses.dataclass(frozen=True)
class BadInput:
    """A call that must raise ``ValueError`` whose message contains ``expect``."""

    name: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    expect: str

    def __str__(self) -> str:
        return self.name


def bad_inputs() -> list[BadInput]:
    """The rejected calls (built lazily: they allocate small arrays)."""
    q = jnp.zeros((2, 8, 4, 16), jnp.float32)
    kv = jnp.zeros((2, 8, 2, 16), jnp.float32)
    ids = jnp.zeros((2, 8), jnp.int32)
    return [
        BadInput("rank-3-query", (q[0], kv, kv), {}, "query"),
        BadInput("rank-5-key", (q, kv[None], kv), {}, "key"),
        BadInput("head-dim-mismatch", (q, kv[..., :8], kv[..., :8]), {}, "head_dim"),
        BadInput("value-shape", (q, kv, kv[:, :4]), {}, "value"),
        BadInput("value-heads", (q, kv, jnp.zeros((2, 8, 1, 16))), {}, "value"),
        BadInput("sinks-shape", (q, kv, kv), {"sinks": jnp.zeros((2,))}, "sinks"),
        BadInput("sinks-integer", (q, kv, kv), {"sinks": jnp.zeros((4,), jnp.int32)}, "sinks"),
        BadInput("sinks-not-array", (q, kv, kv), {"sinks": [0.0] * 4}, "sinks"),
        BadInput(
            "heads-not-multiple",
            (q, jnp.zeros((2, 8, 3, 16)), jnp.zeros((2, 8, 3, 16))),
            {},
            "multiple",
        ),
        BadInput("integer-query", (q.astype(jnp.int32), kv, kv), {}, "floating"),
        BadInput("segment-ids-shape", (q, kv, kv), {"segment_ids": ids[:, :5]}, "segment_ids"),
        BadInput(
            "segment-ids-float",
            (q, kv, kv),
            {"segment_ids": ids.astype(jnp.float32)},
            "segment_ids",
        ),
        BadInput("segment-pair-shape", (q, kv, kv), {"segment_ids": (ids, ids[:1])}, "segment_ids"),
        BadInput("negative-window", (q, kv, kv), {"local_window_size": -1}, "local_window_size"),
        BadInput(
            "negative-window-pair", (q, kv, kv), {"local_window_size": (3, -2)}, "local_window_size"
        ),
        BadInput("softcap-zero", (q, kv, kv), {"logits_soft_cap": 0.0}, "logits_soft_cap"),
        BadInput("softcap-negative", (q, kv, kv), {"logits_soft_cap": -1.0}, "logits_soft_cap"),
        BadInput(
            "unknown-implementation",
            (q, kv, kv),
            {"implementation": "no_such_kernel"},
            "known kernels",
        ),
    ]
