"""Contract 1.2's query offset checked against the float64 reference: a block of queries at
an offset must give those rows of attention over the whole sequence, and their gradients."""

from __future__ import annotations

from typing import Any

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
    sinks: bool = False,
    value_head_dim: int = 8,
) -> list[str]:
    """Failures (one line each, empty when it agrees) of ``implementation`` on a block of
    ``block`` queries at a random offset in a packed sequence of ``length``, with the
    ``OFFSET_MASKS[mask]`` rules, float32, GQA 4/2, against rows of the float64 reference.
    Contract 1.3: ``sinks`` adds one sink logit per head; ``value_head_dim`` (8, the queries'
    and keys', by default) gives the values their own."""
    rng = np.random.default_rng(seed)
    kwargs = OFFSET_MASKS[mask]
    t = length
    start = int(rng.integers(1, t - block + 1))
    q = rng.standard_normal((2, t, 4, 8)).astype(np.float32)
    k = rng.standard_normal((2, t, 2, 8)).astype(np.float32)
    v = rng.standard_normal((2, t, 2, value_head_dim)).astype(np.float32)
    ids = np.sort(rng.integers(0, 4, (2, t)), axis=1).astype(np.int32)
    sink = (2.0 * rng.standard_normal(4)).astype(np.float32) if sinks else None
    rows = slice(start, start + block)
    cot = np.zeros((2, t, 4, value_head_dim), np.float32)
    cot[:, rows] = rng.standard_normal((2, block, 4, value_head_dim))
    want = reference_attention(q, k, v, segment_ids=ids, sinks=sink, cotangent=cot, **kwargs)

    def attend(qb: jax.Array, k: jax.Array, v: jax.Array, sk: Any) -> jax.Array:
        return dot_product_attention(
            qb, k, v, segment_ids=(jnp.asarray(ids[:, rows]), jnp.asarray(ids)),
            query_offset=jnp.int32(start), sinks=sk, implementation=implementation, **kwargs,
        )  # fmt: skip

    primals = (*map(jnp.asarray, (q[:, rows], k, v)), None if sink is None else jnp.asarray(sink))
    out, vjp = jax.vjp(attend, *primals)
    dq, dk, dv, dsinks = vjp(jnp.asarray(cot[:, rows]))
    assert want.dq is not None and want.dk is not None and want.dv is not None
    checks = [
        ("out", out, want.out[:, rows]),
        ("dq", dq, want.dq[:, rows]),
        ("dk", dk, want.dk),
        ("dv", dv, want.dv),
    ]
    if want.dsinks is not None:
        checks.append(("dsinks", dsinks, want.dsinks))
    found = [compare(f"offset {start} {name}", got, ref, tol) for name, got, ref in checks]
    return [f for f in found if f is not None]
