"""Contract 1.2's query offset on ``splash`` (Pallas interpret mode): a block of 256 queries at
a random offset in 640 tokens (several 128-blocks, so the offset moves the mask's block tables)
gives those rows of float64 reference attention and their gradients; a traced offset, which
the block tables cannot be built from, is refused in one sentence."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import zoo_attention
from zoo_attention.testing import OFFSET_MASKS, check_query_offset


# The sliding mask is causal with a window: test_the_offset_with_sinks_and_wider_values runs it
# (and so the causal one's path) with sinks too; the window (both sides) is kept.
@pytest.mark.parametrize(
    "mask",
    [m if m == "window" else pytest.param(m, marks=pytest.mark.full) for m in sorted(OFFSET_MASKS)],
)
def test_a_block_of_queries_at_an_offset_is_those_rows_of_the_whole(mask):
    seed = int(np.random.default_rng().integers(1 << 30))
    assert check_query_offset("splash", mask, seed=seed, length=640, block=256) == []


def test_the_offset_with_sinks_and_wider_values():
    """Contract 1.3 on a sequence block: sinks and values wider than the queries."""
    seed = int(np.random.default_rng().integers(1 << 30))
    failures = check_query_offset(
        "splash", "sliding", seed, length=640, block=256, sinks=True, value_head_dim=12
    )
    assert failures == []


def test_a_traced_offset_is_refused():
    q = jnp.ones((1, 128, 2, 64), jnp.float32)

    def attend(offset: jax.Array) -> jax.Array:
        return zoo_attention.dot_product_attention(
            q, q, q, is_causal=True, query_offset=offset, implementation="splash"
        )

    with pytest.raises(ValueError, match="static int"):
        jax.jit(attend)(jnp.int32(3))
