"""Which block pairs a loop visits, and which of them need no mask.

For a query block the forward pass walks key blocks ``[lo, hi)``: every block holding a key
that some query of the block may see under the causal and window rules. Inside that range the
blocks ``[full_lo, full_hi)`` are *fully visible* (every query sees every key, no padding), so
they run without building a mask. The backward pass walks query blocks for each key block the
same way. Blocks outside ``[lo, hi)`` are skipped: with ``is_causal`` that is the upper
triangle, with a window everything more than a window away. Segment ids are data, so they
cannot bound the loop; blocks whose id ranges do not overlap in any batch row are skipped at
run time instead (see :func:`segments_overlap`).

All bounds are int32 scalars computed from the traced loop index. ``q_offset`` (contract
1.2's query offset) is the position of query row 0: queries are a block of a longer sequence
whose keys start at 0.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from ._policy import Plan


@dataclasses.dataclass(frozen=True)
class BlockRange:
    """Blocks ``[lo, hi)`` to visit, of which ``[full_lo, full_hi)`` need no mask."""

    lo: jax.Array
    full_lo: jax.Array
    full_hi: jax.Array
    hi: jax.Array

    @property
    def num_masked(self) -> jax.Array:
        """How many blocks need a mask: ``[lo, full_lo)`` and ``[full_hi, hi)``."""
        return (self.full_lo - self.lo) + (self.hi - self.full_hi)

    def masked_block(self, n: jax.Array) -> jax.Array:
        """The ``n``-th block needing a mask, so both edges run in one loop (one loop body
        to compile instead of two)."""
        before = self.full_lo - self.lo
        return jnp.where(n < before, self.lo + n, self.full_hi + (n - before))


def _ceil_div(a: jax.Array, b: int) -> jax.Array:
    return -((-a) // b)


def _finish(
    lo_pos: jax.Array,
    hi_pos: jax.Array,
    block: int,
    num_blocks: int,
    full_lo: jax.Array,
    full_hi: jax.Array,
) -> BlockRange:
    # Positions [lo_pos, hi_pos] (inclusive) may be seen; empty when hi_pos < lo_pos.
    lo = jnp.clip(lo_pos // block, 0, num_blocks)
    hi = jnp.clip(hi_pos // block + 1, lo, num_blocks)
    hi = jnp.where(hi_pos >= lo_pos, hi, lo)
    full_lo = jnp.clip(full_lo, lo, hi)
    full_hi = jnp.clip(full_hi, full_lo, hi)
    return BlockRange(lo, full_lo, full_hi, hi)


def kv_blocks_for_query_block(i: jax.Array, plan: Plan, q_offset: jax.Array) -> BlockRange:
    """Key blocks that query block ``i`` must visit in the forward pass."""
    spec = plan.spec
    bq, bk = plan.block_q, plan.block_kv
    q_first = q_offset + i * bq
    q_last = q_offset + jnp.minimum(i * bq + bq, spec.q_len) - 1  # last real query row
    q_block_last = q_first + bq - 1  # padding rows included: harmless, stays conservative
    lo_pos = jnp.int32(0)
    hi_pos = jnp.int32(spec.kv_len - 1)
    full_lo = jnp.int32(0)
    full_hi = jnp.int32(spec.kv_len // bk)  # the padded last block always gets a mask
    if spec.is_causal:
        hi_pos = jnp.minimum(hi_pos, q_last)
        # Key block j is below the diagonal when its last key (j+1)*bk-1 <= q_first.
        full_hi = jnp.minimum(full_hi, (q_first + 1) // bk)
    if spec.local_window is not None:
        left, right = spec.local_window
        lo_pos = jnp.maximum(lo_pos, q_first - left)
        hi_pos = jnp.minimum(hi_pos, q_last + right)
        full_lo = jnp.maximum(full_lo, _ceil_div(q_block_last - left, bk))
        full_hi = jnp.minimum(full_hi, (q_first + right + 1) // bk)
    if not plan.can_skip_mask:
        full_hi = full_lo
    return _finish(lo_pos, hi_pos, bk, plan.num_kv_blocks, full_lo, full_hi)


def query_blocks_for_kv_block(j: jax.Array, plan: Plan, q_offset: jax.Array) -> BlockRange:
    """Query blocks that key block ``j`` must visit in the backward pass."""
    spec = plan.spec
    bq, bk = plan.block_q, plan.block_kv
    # A key block holding padding always gets a mask.
    padded = j * bk + bk - 1 >= spec.kv_len
    # Key positions counted from query row 0, so the rules below compare like with like.
    k_first = j * bk - q_offset
    k_last = jnp.minimum(j * bk + bk, spec.kv_len) - 1 - q_offset  # last real key
    k_block_last = j * bk + bk - 1 - q_offset
    lo_pos = jnp.int32(0)
    hi_pos = jnp.int32(spec.q_len - 1)
    full_lo = jnp.int32(0)
    full_hi = jnp.where(padded, 0, plan.num_q_blocks).astype(jnp.int32)
    if spec.is_causal:
        lo_pos = jnp.maximum(lo_pos, k_first)
        # Query block i is below the diagonal when its first query i*bq >= the last key.
        full_lo = jnp.maximum(full_lo, _ceil_div(k_block_last, bq))
    if spec.local_window is not None:
        left, right = spec.local_window
        # Query q sees key k iff q - left <= k <= q + right, i.e. k - right <= q <= k + left.
        lo_pos = jnp.maximum(lo_pos, k_first - right)
        hi_pos = jnp.minimum(hi_pos, k_last + left)
        full_lo = jnp.maximum(full_lo, _ceil_div(k_block_last - right, bq))
        full_hi = jnp.minimum(full_hi, (k_first + left + 1) // bq)
    if not plan.can_skip_mask:
        full_hi = full_lo
    return _finish(lo_pos, hi_pos, bq, plan.num_q_blocks, full_lo, full_hi)


def id_ranges(ids_blocked: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Per-block ``(min, max)`` segment id, each ``[num_blocks, B]``."""
    return ids_blocked.min(axis=-1), ids_blocked.max(axis=-1)


def segments_overlap(
    q_range: tuple[jax.Array, jax.Array], kv_range: tuple[jax.Array, jax.Array]
) -> jax.Array:
    """Whether a query block and a key block may share a segment id in some batch row.

    Conservative: id ranges that overlap need not share an id, but disjoint ranges never do,
    which is exactly the packed-documents case (ids sorted along the sequence).
    """
    (q_min, q_max), (k_min, k_max) = q_range, kv_range
    return jnp.any(jnp.maximum(q_min, k_min) <= jnp.minimum(q_max, k_max))
