"""Causal load balancing over a context axis: what each device computes, from compiled programs.

A kernel that skips the key blocks a causal mask hides (``chunked``, ``flash_tpu``) does, for a
query chunk at offset ``o`` of length ``c``, the work of attending to keys ``[0, o + c)``. Each
device's work is compiled here as exactly that (its chunks through the contract, with their
query offsets, against that key prefix) and read from XLA's cost analysis: the dual-chunk
layout gives every device the same FLOPs to within 10%, contiguous blocks do not.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest

import zoo_attention
from zoo_attention.context import dual_chunk_chunks, dual_chunk_order

T, H = 4096, 64


def _chunk_flops(offset: int, length: int) -> float:
    q = jax.ShapeDtypeStruct((1, length, 1, H), jnp.float32)
    kv = jax.ShapeDtypeStruct((1, offset + length, 1, H), jnp.float32)

    def attend(q: jax.Array, k: jax.Array, v: jax.Array) -> jax.Array:
        return zoo_attention.dot_product_attention(
            q, k, v, is_causal=True, query_offset=offset, implementation="xla"
        )

    return float(jax.jit(attend).lower(q, kv, kv).compile().cost_analysis()["flops"])


def _device_flops(shards: int, balanced: bool) -> list[float]:
    if not balanced:
        block = T // shards
        return [_chunk_flops(d * block, block) for d in range(shards)]
    chunk = T // (2 * shards)
    return [
        sum(_chunk_flops(c * chunk, chunk) for c in dual_chunk_chunks(d, shards))
        for d in range(shards)
    ]


@pytest.mark.parametrize(
    "shards",
    [
        4,
        # The same layout and cost reading as [4], for another size of the context axis.
        pytest.param(8, marks=pytest.mark.full),
    ],
)
def test_dual_chunk_layout_balances_causal_work(shards):
    balanced = _device_flops(shards, balanced=True)
    contiguous = _device_flops(shards, balanced=False)
    assert max(balanced) <= 1.10 * min(balanced), balanced
    assert max(contiguous) >= 2.0 * min(contiguous), contiguous
    # The layout moves work, it adds none: half-size chunks compute less of the masked
    # triangle on their diagonal, so the total is a little lower, never higher.
    assert 0.85 * sum(contiguous) <= sum(balanced) <= sum(contiguous)


@pytest.mark.parametrize("shards", [1, 2, 3, 4])
def test_the_order_gives_each_shard_its_two_chunks(shards):
    order = dual_chunk_order(8 * shards, shards)
    assert sorted(order) == list(range(8 * shards))
    for d, block in enumerate(order.reshape(shards, 2, 4)):
        assert [int(b[0]) // 4 for b in block] == list(dual_chunk_chunks(d, shards))
