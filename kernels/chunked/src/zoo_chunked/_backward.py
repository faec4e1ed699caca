"""Backward pass: recompute each block pair's probabilities from the saved log-sum-exp.

Flash-attention-2 style: with ``D = rowsum(dO * O)`` and ``P = exp(logits - lse)``,

    dV += Pᵀ dO,   dP = dO Vᵀ,   dS = P * (dP - D),   dQ += dS K,   dK += dSᵀ Q

(times the soft cap's ``1 - tanh²`` and the scale). The outer loop runs over key blocks and
keeps that block's dK/dV in the accumulator dtype; the inner loop runs over the query blocks
that see it and adds into one dQ accumulator of the size of Q. Nothing of size T×S exists.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import jax
import jax.numpy as jnp

from ._layout import (
    block_ids,
    block_keys,
    block_keys_transposed,
    block_queries,
    block_queries_transposed,
    block_query_rows,
    sink_gradient,
    sink_rows,
    unblock_keys_transposed,
    unblock_queries,
)
from ._policy import Plan
from ._ranges import id_ranges, query_blocks_for_kv_block, segments_overlap
from ._scores import accumulator_dtype, apply_mask, block_logits, block_mask

KvGrads = tuple[jax.Array, jax.Array]  # dKᵀ [B, K, H, bk], dVᵀ [B, K, Hv, bk] of one key block


@dataclasses.dataclass(frozen=True)
class _QueryBlock:
    """What the backward pass reads for one query block (R = block_q * G rows)."""

    q: jax.Array  # [B, K, R, H]
    qt: jax.Array  # [B, K, H, R]
    do: jax.Array  # [B, K, R, Hv]
    dot: jax.Array  # [B, K, Hv, R]
    lse: jax.Array  # [B, K, R]
    delta: jax.Array  # [B, K, R]


def _block_grads(
    qi: _QueryBlock,
    k_j: jax.Array,
    kt_j: jax.Array,
    vt_j: jax.Array,
    mask: jax.Array | None,
    plan: Plan,
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """``(dQ_i, dKᵀ_j, dVᵀ_j)`` contributions of one block pair, before the scale factor.

    ``k_j`` is ``[B, K, bk, H]``; ``kt_j`` and ``vt_j`` are ``[B, K, H, bk]``. dK and dV are
    produced transposed so every matmul is a plain ``[m, k] @ [k, n]`` (see ``_layout``).
    """
    acc = qi.lse.dtype
    logits, dcap = block_logits(qi.q, kt_j, plan)
    logits = apply_mask(logits, mask, plan)
    # Hidden logits are MASKED, so exp(MASKED - lse) is exactly 0; rows that see no key have
    # lse = +inf and get 0 everywhere too.
    p = jnp.exp(logits - qi.lse[..., None])
    dvt = jnp.einsum("bkhr,bkrs->bkhs", qi.dot, p.astype(qi.do.dtype), preferred_element_type=acc)
    dp = jnp.einsum("bkrh,bkhs->bkrs", qi.do, vt_j, preferred_element_type=acc)
    ds = p * (dp - qi.delta[..., None])
    if dcap is not None:
        ds = ds * dcap
    ds = ds.astype(qi.q.dtype)
    dq = jnp.einsum("bkrs,bksh->bkrh", ds, k_j, preferred_element_type=acc)
    dkt = jnp.einsum("bkhr,bkrs->bkhs", qi.qt, ds, preferred_element_type=acc)
    return dq, dkt, dvt


def row_delta(out: jax.Array, d_out: jax.Array, acc_dtype: jnp.dtype) -> jax.Array:
    """``D = rowsum(dO * O)`` ``[B, T, N]`` in the accumulator dtype."""
    return jnp.sum(d_out.astype(acc_dtype) * out.astype(acc_dtype), axis=-1)


def _query_blocks(
    query: jax.Array, out: jax.Array, lse: jax.Array, d_out: jax.Array, plan: Plan
) -> tuple[Callable[[jax.Array], _QueryBlock], tuple[int, ...]]:
    """``(query_block, shape)``: query block ``i`` as the backward pass reads it (queries and
    output cotangents, both also transposed, the log-sum-exp and ``D = rowsum(dO * O)``), and
    the shape of the blocked queries (that of the dQ accumulator)."""
    acc_dtype = accumulator_dtype(query.dtype)
    deltab = block_query_rows(row_delta(out, d_out, acc_dtype), plan)
    d_out = d_out.astype(query.dtype)
    qb = block_queries(query, plan)
    qtb = block_queries_transposed(query, plan)
    dob = block_queries(d_out, plan)
    dotb = block_queries_transposed(d_out, plan)

    def query_block(i: jax.Array) -> _QueryBlock:
        return _QueryBlock(qb[i], qtb[i], dob[i], dotb[i], lse[i], deltab[i])

    return query_block, tuple(qb.shape)


def backward(
    query: jax.Array,
    key: jax.Array,
    value: jax.Array,
    q_ids: jax.Array | None,
    kv_ids: jax.Array | None,
    q_offset: jax.Array,
    sinks: jax.Array | None,
    out: jax.Array,
    lse: jax.Array,
    d_out: jax.Array,
    plan: Plan,
) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array | None]:
    """Gradients of blockwise attention.

    Args:
        query, key, value, q_ids, kv_ids, q_offset, sinks: as given to
            :func:`zoo_chunked._forward.forward`.
        out: its output ``[B, T, N, Hv]``; lse: its log-sum-exp ``[nq, B, K, block_q * G]``.
        d_out: cotangent of ``out``, ``[B, T, N, Hv]``.
        plan: the tiling.

    Returns:
        ``(dq, dk, dv, dsinks)`` in the dtypes of query, key, value and sinks (``dsinks``
        ``None`` without sinks; :func:`_sink_grads`).
    """
    acc_dtype = accumulator_dtype(query.dtype)
    query_block, dq_shape = _query_blocks(query, out, lse, d_out, plan)
    kb = block_keys(key, plan)
    ktb = block_keys_transposed(key, plan)
    vtb = block_keys_transposed(value, plan)

    # Tested on the ids themselves, not on `segmented`, so that their types narrow.
    segmented = False
    if q_ids is not None and kv_ids is not None:
        segmented = True
        qidb = block_ids(q_ids, plan.block_q, plan.num_q_blocks)
        kvidb = block_ids(kv_ids, plan.block_kv, plan.num_kv_blocks)
        q_rng, kv_rng = id_ranges(qidb), id_ranges(kvidb)

    def kv_block(dq: jax.Array, j: jax.Array) -> tuple[jax.Array, KvGrads]:
        k_j, kt_j, vt_j = kb[j], ktb[j], vtb[j]
        kv_ids_j = kvidb[j] if segmented else None
        kv_r = (kv_rng[0][j], kv_rng[1][j]) if segmented else None

        def body(masked: bool) -> Callable[[jax.Array, tuple], tuple]:
            def step(i: jax.Array, carry: tuple[jax.Array, jax.Array, jax.Array]) -> tuple:
                dk, dv, dq = carry

                def run(_: None) -> tuple[jax.Array, jax.Array, jax.Array]:
                    mask = None
                    if masked:
                        q_ids_i = qidb[i] if segmented else None
                        mask = block_mask(i, j, q_ids_i, kv_ids_j, plan, q_offset)
                    return _block_grads(query_block(i), k_j, kt_j, vt_j, mask, plan)

                if masked and kv_r is not None:  # segmented
                    q_r = (q_rng[0][i], q_rng[1][i])
                    # Skipped blocks contribute zeros; dQ itself stays out of the branch so
                    # the large accumulator is updated in place, never copied.
                    dq_i, dk_i, dv_i = jax.lax.cond(
                        segments_overlap(q_r, kv_r),
                        run,
                        lambda _: (
                            jnp.zeros(dq.shape[1:], acc_dtype),
                            jnp.zeros_like(dk),
                            jnp.zeros_like(dv),
                        ),
                        None,
                    )
                else:
                    dq_i, dk_i, dv_i = run(None)
                return dk + dk_i, dv + dv_i, dq.at[i].add(dq_i)

            return step

        carry = (jnp.zeros(kt_j.shape, acc_dtype), jnp.zeros(vt_j.shape, acc_dtype), dq)
        if not plan.has_mask:
            carry = jax.lax.fori_loop(0, plan.num_q_blocks, body(False), carry)
        else:
            rng = query_blocks_for_kv_block(j, plan, q_offset)
            masked = body(True)
            carry = jax.lax.fori_loop(
                0, rng.num_masked, lambda n, c: masked(rng.masked_block(n), c), carry
            )
            if plan.can_skip_mask:
                carry = jax.lax.fori_loop(rng.full_lo, rng.full_hi, body(False), carry)
        dk, dv, dq = carry
        return dq, ((dk * scale).astype(key.dtype), dv.astype(value.dtype))

    scale = jnp.asarray(plan.spec.scale, acc_dtype)
    dq0 = jnp.zeros(dq_shape, acc_dtype)
    indices = jnp.arange(plan.num_kv_blocks, dtype=jnp.int32)
    dq, (dkb, dvb) = jax.lax.scan(kv_block, dq0, indices)
    dq = unblock_queries(dq * scale, plan).astype(query.dtype)
    dk = unblock_keys_transposed(dkb, plan)
    dv = unblock_keys_transposed(dvb, plan)
    dsinks = None if sinks is None else _sink_grads(sinks, out, lse, d_out, plan)
    return dq, dk, dv, dsinks


def _sink_grads(
    sinks: jax.Array, out: jax.Array, lse: jax.Array, d_out: jax.Array, plan: Plan
) -> jax.Array:
    """``d sink = -sum over the head's rows of p_sink * D`` ``[N]`` in the sinks' dtype (the
    sink's column has no value)."""
    acc_dtype = accumulator_dtype(out.dtype)
    sink = sink_rows(sinks.astype(acc_dtype), plan)
    delta = block_query_rows(row_delta(out, d_out, acc_dtype), plan)  # [nq, B, K, R]
    # Rows that see no key have lse = +inf (and D = 0): no term.
    return sink_gradient(-jnp.exp(sink - lse) * delta, plan).astype(sinks.dtype)
