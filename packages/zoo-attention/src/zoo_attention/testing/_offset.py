"""Contract 1.2's query offset checked against the float64 reference: a block of queries at
an offset must give those rows of attention over the whole sequence, and their gradients."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from .._api import dot_product_attention
from ._check import compare
from ._reference import reference_attention

#: Masks whose rules depend on positions, so the offset matters: name -> keyword arguments.
OFFSET_MASKS: dict[str, dict] = {
    "causal": {"is_causal": True},
    "sliding": {"is_causal": True, "local_window_size": (7, 0)},
    "window": {"local_window_size": 5},
}


def check_query_offset(
    implementation: str,
    mask: str,
    seed: int,
    tol: float = 2e-5,
    *,
    length: int = 40,
    block: int = 10,
) -> list[str]:
    """Failures (one line each, empty when it agrees) of ``implementation`` on a block of
    ``block`` queries at a random offset in a packed sequence of ``length``, with the
    ``OFFSET_MASKS[mask]`` rules, float32, GQA 4/2, against rows of the float64 reference."""
    rng = np.random.default_rng(seed)
    kwargs = OFFSET_MASKS[mask]
    t = length
    start = int(rng.integers(1, t - block + 1))
    q = rng.standard_normal((2, t, 4, 8)).astype(np.float32)
    k, v = (rng.standard_normal((2, t, 2, 8)).astype(np.float32) for _ in range(2))
    ids = np.sort(rng.integers(0, 4, (2, t)), axis=1).astype(np.int32)
    rows = slice(start, start + block)
    cot = np.zeros_like(q)
    cot[:, rows] = rng.standard_normal((2, block, 4, 8))
    want = reference_attention(q, k, v, segment_ids=ids, cotangent=cot, **kwargs)

    def attend(qb: jax.Array, k: jax.Array, v: jax.Array) -> jax.Array:
        return dot_product_attention(
            qb, k, v, segment_ids=(jnp.asarray(ids[:, rows]), jnp.asarray(ids)),
            query_offset=jnp.int32(start), implementation=implementation, **kwargs,
        )  # fmt: skip

    out, vjp = jax.vjp(attend, *map(jnp.asarray, (q[:, rows], k, v)))
    dq, dk, dv = vjp(jnp.asarray(cot[:, rows]))
    assert want.dq is not None and want.dk is not None and want.dv is not None
    checks = [
        ("out", out, want.out[:, rows]),
        ("dq", dq, want.dq[:, rows]),
        ("dk", dk, want.dk),
        ("dv", dv, want.dv),
    ]
    found = [compare(f"offset {start} {name}", got, ref, tol) for name, got, ref in checks]
    return [f for f in found if f is not None]
