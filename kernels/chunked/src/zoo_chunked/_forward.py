"""Forward pass: online softmax over key blocks, one query block at a time.

For each query block a loop over its key blocks keeps a running row max ``m``, running sum
``denom`` and an unnormalised output accumulator (all in the accumulator dtype, float32 for 16-bit
inputs). Memory is one block pair of logits at a time; the only residual saved for the
backward pass is the per-row log-sum-exp, O(T).
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp

from ._layout import (
    block_ids,
    block_keys,
    block_keys_transposed,
    block_queries,
    sink_rows,
    unblock_queries,
)
from ._policy import Plan
from ._ranges import id_ranges, kv_blocks_for_query_block, segments_overlap
from ._scores import MASKED, accumulator_dtype, apply_mask, block_logits, block_mask

State = tuple[jax.Array, jax.Array, jax.Array]  # running max, running sum, accumulator


def _attend_block(
    state: State,
    q_i: jax.Array,
    kt_j: jax.Array,
    v_j: jax.Array,
    mask: jax.Array | None,
    plan: Plan,
) -> State:
    m, denom, acc = state
    logits = apply_mask(block_logits(q_i, kt_j, plan)[0], mask, plan)
    m_new = jnp.maximum(m, logits.max(axis=-1))
    # A row with nothing visible so far has m == m_new == MASKED and collects exp(0) terms
    # here; the first visible key makes alpha exactly 0 and wipes them out.
    alpha = jnp.exp(m - m_new)
    p = jnp.exp(logits - m_new[..., None])
    denom = alpha * denom + p.sum(axis=-1)
    pv = jnp.einsum("bkrs,bksh->bkrh", p.astype(v_j.dtype), v_j, preferred_element_type=acc.dtype)
    return m_new, denom, alpha[..., None] * acc + pv


def forward(
    query: jax.Array,
    key: jax.Array,
    value: jax.Array,
    q_ids: jax.Array | None,
    kv_ids: jax.Array | None,
    q_offset: jax.Array,
    sinks: jax.Array | None,
    plan: Plan,
) -> tuple[jax.Array, jax.Array]:
    """Blockwise attention.

    Args:
        query: ``[B, T, N, H]``; key: ``[B, S, K, H]``; value: ``[B, S, K, Hv]``.
        q_ids, kv_ids: int32 ``[B, T]`` and ``[B, S]`` segment ids, or both ``None``.
        q_offset: int32 scalar, the position of query row 0 (keys start at 0).
        sinks: ``[N]`` sink logits, one more term of each row's denominator, or ``None``.
        plan: the tiling.

    Returns:
        ``out [B, T, N, Hv]`` in ``query.dtype`` and the log-sum-exp of each row (the sink
        included) ``[nq, B, K, block_q * G]`` in the accumulator dtype (``+inf`` for rows that
        see no key).
    """
    acc_dtype = accumulator_dtype(query.dtype)
    qb = block_queries(query, plan)
    ktb = block_keys_transposed(key, plan)
    vb = block_keys(value, plan)
    sink = None if sinks is None else sink_rows(sinks.astype(acc_dtype), plan)[None]
    # Tested on the ids themselves, not on `segmented`, so that their types narrow.
    segmented = False
    if q_ids is not None and kv_ids is not None:
        segmented = True
        qidb = block_ids(q_ids, plan.block_q, plan.num_q_blocks)
        kvidb = block_ids(kv_ids, plan.block_kv, plan.num_kv_blocks)
        q_rng, kv_rng = id_ranges(qidb), id_ranges(kvidb)
    _, b, k, r, _ = qb.shape
    hv = vb.shape[-1]

    def query_block(_: None, i: jax.Array) -> tuple[None, tuple[jax.Array, jax.Array]]:
        q_i = qb[i]
        q_ids_i = qidb[i] if segmented else None
        q_r = (q_rng[0][i], q_rng[1][i]) if segmented else None

        def body(masked: bool) -> Callable[[jax.Array, State], State]:
            def step(j: jax.Array, state: State) -> State:
                if not masked:
                    return _attend_block(state, q_i, ktb[j], vb[j], None, plan)

                def run(state: State) -> State:
                    kv_ids_j = kvidb[j] if segmented else None
                    mask = block_mask(i, j, q_ids_i, kv_ids_j, plan, q_offset)
                    return _attend_block(state, q_i, ktb[j], vb[j], mask, plan)

                if q_r is None:  # not segmented
                    return run(state)
                kv_r = (kv_rng[0][j], kv_rng[1][j])
                return jax.lax.cond(segments_overlap(q_r, kv_r), run, lambda s: s, state)

            return step

        state: State = (
            jnp.full((b, k, r), MASKED, acc_dtype),
            jnp.zeros((b, k, r), acc_dtype),
            jnp.zeros((b, k, r, hv), acc_dtype),
        )
        if not plan.has_mask:
            state = jax.lax.fori_loop(0, plan.num_kv_blocks, body(False), state)
        else:
            rng = kv_blocks_for_query_block(i, plan, q_offset)
            masked = body(True)
            state = jax.lax.fori_loop(
                0, rng.num_masked, lambda n, st: masked(rng.masked_block(n), st), state
            )
            if plan.can_skip_mask:
                state = jax.lax.fori_loop(rng.full_lo, rng.full_hi, body(False), state)
        m, denom, acc = state
        seen = m > MASKED  # a row that saw no key keeps exactly the initial MASKED
        if sink is not None:
            # The sink joins the running max and the sum once, after the keys: a term of the
            # denominator with no value.
            m_all = jnp.maximum(m, sink)
            alpha = jnp.exp(m - m_all)
            denom = alpha * denom + jnp.exp(sink - m_all)
            acc = alpha[..., None] * acc
            m = m_all
        denom = jnp.where(seen, denom, 1.0)
        out = jnp.where(seen[..., None], acc / denom[..., None], 0.0)
        lse = jnp.where(seen, m + jnp.log(denom), jnp.inf)
        return None, (out.astype(query.dtype), lse)

    indices = jnp.arange(plan.num_q_blocks, dtype=jnp.int32)
    _, (out, lse) = jax.lax.scan(query_block, None, indices)
    return unblock_queries(out, plan), lse
