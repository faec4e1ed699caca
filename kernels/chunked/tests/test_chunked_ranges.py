"""The block ranges each loop walks, checked against the contract's mask built by brute force.

Every block pair holding a visible (query, key) pair must be visited, nothing else may be
(for causal and window rules), and blocks run without a mask must be fully visible.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

import zoo_attention
from zoo_attention.testing import reference_mask
from zoo_chunked import BlockSizes, make_plan
from zoo_chunked._ranges import (
    kv_blocks_for_query_block,
    query_blocks_for_kv_block,
    segments_overlap,
)


def _configs(rng: np.random.Generator, count: int):
    for _ in range(count):
        t, s = (int(x) for x in rng.integers(1, 90, 2))
        causal = bool(rng.integers(2))
        window = None
        if rng.integers(2):
            window = (int(rng.integers(0, 40)), int(rng.integers(0, 40)))
        blocks = BlockSizes(int(rng.integers(1, 40)), int(rng.integers(1, 40)))
        yield t, s, causal, window, blocks


def _block_truth(mask: np.ndarray, plan) -> tuple[np.ndarray, np.ndarray]:
    """``any_visible[i, j]`` and ``all_visible[i, j]`` per block pair (padding counts as hidden)."""
    nq, nk, bq, bk = plan.num_q_blocks, plan.num_kv_blocks, plan.block_q, plan.block_kv
    padded = np.zeros((nq * bq, nk * bk), bool)
    padded[: mask.shape[0], : mask.shape[1]] = mask
    tiles = padded.reshape(nq, bq, nk, bk)
    any_visible = tiles.any(axis=(1, 3))
    # Padded query rows are ignored (their results are discarded); padded keys are not.
    row_real = (np.arange(nq * bq) < mask.shape[0]).reshape(nq, bq)
    all_visible = np.all(tiles | ~row_real[:, :, None, None], axis=(1, 3))
    return any_visible, all_visible


def test_ranges_cover_exactly_the_visible_blocks() -> None:
    rng = np.random.default_rng()
    for t, s, causal, window, blocks in _configs(rng, 80):
        q = jax.ShapeDtypeStruct((1, t, 1, 8), jnp.float32)
        kv = jax.ShapeDtypeStruct((1, s, 1, 8), jnp.float32)
        # Half the configurations place the queries at a random offset (contract 1.2): the
        # truth is then rows [off, off + T) of the mask of a longer query sequence.
        off = int(rng.integers(0, s + 1)) if rng.random() < 0.5 else 0
        spec, _ = zoo_attention.make_spec(
            q, kv, kv, is_causal=causal, local_window_size=window, query_offset=off
        )
        plan = make_plan(spec, blocks)
        mask = reference_mask(1, off + t, s, is_causal=causal, local_window=window)[0][off:]
        any_visible, all_visible = _block_truth(mask, plan)
        label = f"T={t} S={s} offset={off} causal={causal} window={window} plan={plan}"
        for i in range(plan.num_q_blocks):
            r = kv_blocks_for_query_block(jnp.int32(i), plan, jnp.int32(off))
            lo, flo, fhi, hi = (int(x) for x in (r.lo, r.full_lo, r.full_hi, r.hi))
            visited = np.zeros(plan.num_kv_blocks, bool)
            visited[lo:hi] = True
            assert np.array_equal(visited, any_visible[i]), label
            if plan.has_mask:
                assert lo <= flo <= fhi <= hi, label
                assert all_visible[i, flo:fhi].all(), label
        for j in range(plan.num_kv_blocks):
            r = query_blocks_for_kv_block(jnp.int32(j), plan, jnp.int32(off))
            lo, flo, fhi, hi = (int(x) for x in (r.lo, r.full_lo, r.full_hi, r.hi))
            visited = np.zeros(plan.num_q_blocks, bool)
            visited[lo:hi] = True
            assert np.array_equal(visited, any_visible[:, j]), label
            if plan.has_mask:
                assert lo <= flo <= fhi <= hi, label
                assert all_visible[flo:fhi, j].all(), label


def test_causal_skips_the_upper_triangle_and_runs_the_lower_unmasked() -> None:
    q = jax.ShapeDtypeStruct((1, 64, 1, 8), jnp.float32)
    spec, _ = zoo_attention.make_spec(q, q, q, is_causal=True)
    plan = make_plan(spec, BlockSizes(16, 16))
    for i in range(4):
        r = kv_blocks_for_query_block(jnp.int32(i), plan, jnp.int32(0))
        # Blocks before the diagonal need no mask; only the diagonal block is masked.
        assert (int(r.lo), int(r.full_lo), int(r.full_hi), int(r.hi)) == (0, 0, i, i + 1)


def test_segment_overlap_is_exact_for_sorted_ids() -> None:
    q_min, q_max = jnp.array([[0], [3]]), jnp.array([[2], [3]])
    assert bool(segments_overlap((q_min[0], q_max[0]), (jnp.array([2]), jnp.array([5]))))
    assert not bool(segments_overlap((q_min[1], q_max[1]), (jnp.array([0]), jnp.array([2]))))
    # Any batch row overlapping is enough.
    assert bool(
        segments_overlap(
            (jnp.array([0, 5]), jnp.array([1, 6])), (jnp.array([9, 6]), jnp.array([9, 7]))
        )
    )
