"""Multi-block geometry against the float64 reference: block edges that do not line up, tails,
skipped and fully-visible blocks, cross attention, and query blocks that see no key at all."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from chunked_helpers import max_error, packed_ids, random_inputs, reference

import zoo_attention
from zoo_chunked import BlockSizes, ChunkedKernel, chunked_attention, make_plan

CASES: list[tuple[str, dict[str, Any]]] = [
    # name, geometry and features; block sizes are upper bounds.
    ("tiny-blocks-mqa-causal", dict(bq=8, bk=8, t=70, s=70, n=4, k=1, is_causal=True)),
    ("q-block-smaller-window", dict(bq=16, bk=40, t=100, s=100, local_window_size=(3, 17))),
    (
        "q-block-larger-causal-window-cap",
        dict(
            bq=40,
            bk=16,
            t=100,
            s=100,
            is_causal=True,
            local_window_size=(25, 0),
            logits_soft_cap=2.0,
        ),
    ),
    ("cross-short-q-causal", dict(bq=8, bk=16, t=30, s=130, is_causal=True)),
    ("cross-long-q-causal", dict(bq=16, bk=8, t=130, s=30, is_causal=True)),
    ("window-wider-than-sequence", dict(bq=16, bk=16, t=50, s=50, local_window_size=(1000, 1000))),
    ("diagonal-only-window", dict(bq=16, bk=16, t=64, s=64, local_window_size=(0, 0))),
    ("packed-segments-causal", dict(bq=16, bk=16, t=96, s=96, is_causal=True, segments="packed")),
    ("unsorted-segments", dict(bq=16, bk=16, t=50, s=50, segments="random")),
    ("empty-query-blocks", dict(bq=8, bk=8, t=64, s=16, local_window_size=(2, 2))),
    ("no-mask-with-tails", dict(bq=24, bk=24, t=50, s=77, scale=0.4)),
]


def _run(rng: np.random.Generator, geometry: dict[str, Any], dtype: Any = jnp.float32):
    g = dict(geometry)
    bq, bk, t, s = g.pop("bq"), g.pop("bk"), g.pop("t"), g.pop("s")
    n, k = g.pop("n", 4), g.pop("k", 2)
    segments = g.pop("segments", None)
    b, h = 2, 16
    q, kk, v, do = random_inputs(rng, b, t, s, n, k, h, dtype)
    if segments == "packed":
        ids = packed_ids(rng, b, t, docs=4)
        g["segment_ids"] = ids
    elif segments == "random":
        g["segment_ids"] = jnp.asarray(rng.integers(0, 3, (b, t)), jnp.int32)
    kernel = ChunkedKernel(block_q=bq, block_kv=bk)
    spec, ids = zoo_attention.make_spec(q, kk, v, **g)
    plan = make_plan(spec, kernel.block_sizes(spec.platform))
    assert plan.num_q_blocks > 1 or plan.num_kv_blocks > 1

    def attend(q: jax.Array, k: jax.Array, v: jax.Array) -> jax.Array:
        return kernel(q, k, v, ids, spec)

    out, vjp = jax.vjp(jax.jit(attend), q, kk, v)
    grads = vjp(do)
    return out, grads, reference(q, kk, v, do, **g)


#: Geometry that test_conformance_with_small_blocks (blocks of 32 x 24) runs too, marked
#: ``full``: the case there that covers it.
FULL = {
    "tiny-blocks-mqa-causal": "gqa8-mqa-causal (one key head, causal, several blocks)",
    "cross-long-q-causal": "q97-kv33-causal (more queries than keys, causal)",
    "empty-query-blocks": "empty-rows-window-q48-kv16 (a query block that sees no key)",
    "no-mask-with-tails": "cross-q33-kv97-segments (tails on both axes, not causal)",
    "packed-segments-causal": "all-bf16, empty-rows-causal-segments-bf16 (causal, packed ids)",
}


@pytest.mark.parametrize(
    ("name", "geometry"),
    [pytest.param(*c, marks=pytest.mark.full) if c[0] in FULL else c for c in CASES],
    ids=[c[0] for c in CASES],
)
def test_multi_block_matches_reference(name: str, geometry: dict[str, Any]) -> None:
    rng = np.random.default_rng()
    out, (dq, dk, dv), ref = _run(rng, geometry)
    assert max_error(out, ref.out) < 2e-5, name
    for got, want in ((dq, ref.dq), (dk, ref.dk), (dv, ref.dv)):
        assert max_error(got, want) < 1e-4, name
    empty = ~ref.row_sees_key.transpose(0, 2, 1)
    assert np.all(np.asarray(out)[empty] == 0)


def test_the_full_cases_name_real_ones() -> None:
    assert set(FULL) <= {name for name, _ in CASES}


def test_float64_is_exact_to_float64_precision() -> None:
    # With float64 inputs the accumulators are float64, so only summation order differs.
    with jax.enable_x64(True):
        rng = np.random.default_rng()
        geometry = dict(bq=16, bk=24, t=61, s=61, is_causal=True, local_window_size=(20, 4))
        out, (dq, dk, dv), ref = _run(rng, geometry, jnp.float64)
        assert out.dtype == jnp.float64
        for got, want in ((out, ref.out), (dq, ref.dq), (dk, ref.dk), (dv, ref.dv)):
            assert max_error(got, want) < 1e-12


def test_custom_vjp_function_directly() -> None:
    # The public function takes a plan; same result as through the kernel object.
    rng = np.random.default_rng()
    q, k, v, _ = random_inputs(rng, 1, 40, 40, 2, 2, 8)
    spec, _ = zoo_attention.make_spec(q, k, v, is_causal=True)
    out = chunked_attention(
        q, k, v, None, None, jnp.int32(0), None, make_plan(spec, BlockSizes(16, 16))
    )
    ref = reference(q, k, v, None, is_causal=True)
    assert max_error(out, ref.out) < 2e-5
