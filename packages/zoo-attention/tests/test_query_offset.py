"""Contract 1.2's query offset on the ``xla`` reference kernel against float64 reference rows,
alone and with contract 1.3's sinks and a value head dim of its own."""

from __future__ import annotations

import numpy as np
import pytest

from zoo_attention.testing import OFFSET_MASKS, check_query_offset


@pytest.mark.parametrize("mask", sorted(OFFSET_MASKS))
def test_a_block_of_queries_at_an_offset_is_those_rows_of_the_whole(mask):
    assert (
        check_query_offset("xla", mask, seed=int(np.random.default_rng().integers(1 << 30))) == []
    )


@pytest.mark.parametrize("mask", sorted(OFFSET_MASKS))
def test_the_offset_with_sinks_and_wider_values(mask):
    seed = int(np.random.default_rng().integers(1 << 30))
    assert check_query_offset("xla", mask, seed, sinks=True, value_head_dim=12) == []
