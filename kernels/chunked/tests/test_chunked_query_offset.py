"""Contract 1.2's query offset on ``chunked`` against float64 reference rows, with blocks small
enough that the offset moves the block ranges both passes visit."""

from __future__ import annotations

import numpy as np
import pytest

from zoo_attention.testing import OFFSET_MASKS, check_query_offset


# The sliding mask is causal with a window: test_the_offset_with_sinks_and_wider_values runs it
# (and so the causal one's path) with sinks too; the window (both sides) is kept.
@pytest.mark.parametrize(
    "mask",
    [m if m == "window" else pytest.param(m, marks=pytest.mark.full) for m in sorted(OFFSET_MASKS)],
)
def test_a_block_of_queries_at_an_offset_is_those_rows_of_the_whole(mask, monkeypatch):
    monkeypatch.setenv("ZOO_CHUNKED_BLOCK_Q", "4")
    monkeypatch.setenv("ZOO_CHUNKED_BLOCK_KV", "8")
    seed = int(np.random.default_rng().integers(1 << 30))
    assert check_query_offset("chunked", mask, seed=seed) == []


def test_the_offset_with_sinks_and_wider_values(monkeypatch):
    """Contract 1.3 on a sequence block: sinks and values wider than the queries."""
    monkeypatch.setenv("ZOO_CHUNKED_BLOCK_Q", "4")
    monkeypatch.setenv("ZOO_CHUNKED_BLOCK_KV", "8")
    seed = int(np.random.default_rng().integers(1 << 30))
    assert check_query_offset("chunked", "sliding", seed, sinks=True, value_head_dim=12) == []
