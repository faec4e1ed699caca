"""Cross-entropy calls the contract rejects, with the word each error message must contain."""

from __future__ import annotations

import jax.numpy as jnp

from ...testing import BadInput


def bad_inputs() -> list[BadInput]:
    """The rejected calls (built lazily: they allocate small arrays)."""
    h, w = jnp.zeros((2, 5, 8), jnp.float32), jnp.zeros((8, 30), jnp.float32)
    t = jnp.zeros((2, 5), jnp.int32)
    return [
        BadInput("rank-1-hidden", (h[0, 0], w, t[0, 0]), {}, "hidden"),
        BadInput("rank-3-head", (h, w[None], t), {}, "head"),
        BadInput("width-mismatch", (h, jnp.zeros((9, 30)), t), {}, "D=8"),
        BadInput("transposed-head", (h, w.T, t), {}, "head_layout"),
        BadInput("unknown-layout", (h, w, t), {"head_layout": "vh"}, "head_layout"),
        BadInput("integer-hidden", (h.astype(jnp.int32), w, t), {}, "floating"),
        BadInput("float-targets", (h, w, t.astype(jnp.float32)), {}, "targets"),
        BadInput("targets-shape", (h, w, t[:, :4]), {}, "targets"),
        BadInput("mask-shape", (h, w, t), {"loss_mask": jnp.ones((2, 4), bool)}, "loss_mask"),
        BadInput("negative-soft-cap", (h, w, t), {"soft_cap": -1.0}, "soft_cap"),
        BadInput("zero-temperature", (h, w, t), {"temperature": 0.0}, "temperature"),
        BadInput("empty-width", (h[..., :0], w[:0], t), {}, "empty"),
        BadInput(
            "unknown-implementation", (h, w, t), {"implementation": "no_such_kernel"}, "known"
        ),
    ]
