"""The ``pallas_call`` wrappers: grids, BlockSpecs, index maps and named operands of each kernel.

Every index map receives the grid indices followed by the scalar-prefetched block ranges
(SMEM). The block index along a visited axis is ``min(lo + step, max(hi, lo))``, so steps past a
row's last block fetch nothing new; with segment ids it is read from the ranges' fetch table,
which also sends steps on blocks that share no segment to the next block that computes.

GQA: the forward and dQ kernels take ``P = cfg.heads_per_step`` query heads of one group per
grid step. In the kernel layout the query heads of a group are adjacent column blocks, so one
``(bq, P·Hp)`` block holds them all, and their one key/value head is column block
``c // (G / P)`` of the ``[B, Sp, K·Hp]`` arrays: each key/value block is fetched once per
``P`` query heads instead of once per query head.

Index maps divide with ``lax.div``: Python's ``//`` on a traced integer lowers through a query of
the default device's TPU generation, which fails when compiling for a TPU from a CPU host.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from . import _cost, _layout
from ._config import FlashConfig
from ._delta_kernel import delta_kernel
from ._dkdv_kernel import dkdv_kernel
from ._dq_kernel import dq_kernel
from ._fwd_kernel import forward_kernel
from ._mask_info import BlockRanges, SegmentBounds, kv_ranges, q_ranges, segment_bounds
from ._policy import LANES
from ._refs import Operands, Semantics, call

SegmentIds = tuple[jax.Array, jax.Array] | None
#: The forward's residuals in the kernel layout: q, k, v, out, lse.
KernelLayout = tuple[jax.Array, jax.Array, jax.Array, jax.Array, jax.Array]
QUERY_MAJOR: Semantics = ("parallel", "parallel", "parallel", "arbitrary")


def kv_head_block(c: jax.Array, cfg: FlashConfig) -> jax.Array:
    """Key/value head of query-head block ``c`` (``P`` heads from ``c·P``): ``c // (G / P)``."""
    return jax.lax.div(c, jnp.int32(cfg.group_size // cfg.heads_per_step))


def visited(lo: jax.Array, hi: jax.Array, row: jax.Array, step: jax.Array) -> jax.Array:
    """Block visited at ``step`` of ``row``: ``lo + step`` clamped into ``[lo, max(hi, lo)]``."""
    start = lo[row]
    return jnp.minimum(start + step, jnp.maximum(hi[row], start))


#: An index map's block index: grid indices (traced scalars), values made from them, constants.
BlockIndex = tuple[jax.Array | int, ...]

#: ``visit(row, step, prefetch_refs)``: the inner block a row's step loads.
Visit = Callable[[Any, Any, Sequence[Any]], Any]


def _prefetch(ops: Operands, ranges: BlockRanges, seg: SegmentBounds | None) -> Visit:
    """Declare the prefetched ranges; returns how the index maps find a step's block in them."""
    ops.prefetch += [("lo", ranges.lo), ("hi", ranges.hi)]
    if seg is not None:
        ops.prefetch += [
            ("q_min", seg.q_min),
            ("q_max", seg.q_max),
            ("kv_min", seg.kv_min),
            ("kv_max", seg.kv_max),
        ]
    if ranges.fetch is None:
        return lambda row, step, pre: visited(pre[0], pre[1], row, step)
    at, steps = len(ops.prefetch), ranges.steps
    ops.prefetch.append(("fetch", ranges.fetch))
    return lambda row, step, pre: pre[at][row * steps + step]


def _segments(
    cfg: FlashConfig, segment_ids: SegmentIds, block_q: int, block_kv: int
) -> tuple[SegmentBounds | None, list[jax.Array]]:
    """Block id bounds and the ``[B, 1, L]`` id rows the kernels read, or nothing."""
    if not cfg.has_segments or segment_ids is None:
        return None, []
    q_ids = _layout.padded_ids(segment_ids[0], cfg.q_len_padded)
    kv_ids = _layout.padded_ids(segment_ids[1], cfg.kv_len_padded)
    bounds = segment_bounds(q_ids, kv_ids, block_q, block_kv)
    return bounds, [q_ids[:, None, :], kv_ids[:, None, :]]


def _query_major(
    cfg: FlashConfig, block_q: int, block_kv: int, segment_ids: SegmentIds
) -> tuple[Operands, BlockRanges, dict[str, Callable[..., tuple]]]:
    """Operands and index maps shared by the forward and dQ kernels.

    Grid ``(B, N / P, Tp / bq, steps)``; the maps returned are for query-side blocks
    ``(bq, P·Hp)``, key/value blocks ``(bk, Hp)`` and per-query rows ``(P, 1, bq)``.
    """
    nq = cfg.q_len_padded // block_q
    seg, id_rows = _segments(cfg, segment_ids, block_q, block_kv)
    ranges = kv_ranges(cfg, block_q, block_kv, seg)

    ops = Operands()
    visit = _prefetch(ops, ranges, seg)

    def q_map(b: jax.Array, c: jax.Array, i: jax.Array, j: jax.Array, *pre: Any) -> BlockIndex:
        return b, i, c

    def kv_map(b: jax.Array, c: jax.Array, i: jax.Array, j: jax.Array, *pre: Any) -> BlockIndex:
        return b, visit(b * nq + i, j, pre), kv_head_block(c, cfg)

    def row_map(b: jax.Array, c: jax.Array, i: jax.Array, j: jax.Array, *pre: Any) -> BlockIndex:
        return b, c, 0, i

    if seg is not None:
        ops.inputs += [
            (
                "q_ids",
                pl.BlockSpec((None, 1, block_q), lambda b, c, i, j, *pre: (b, 0, i)),
                id_rows[0],
            ),
            (
                "kv_ids",
                pl.BlockSpec(
                    (None, 1, block_kv), lambda b, c, i, j, *pre: (b, 0, visit(b * nq + i, j, pre))
                ),
                id_rows[1],
            ),
        ]
        ops.scratch.append(("q_ids_col", pltpu.VMEM((block_q, LANES), jnp.int32)))
    return ops, ranges, {"q": q_map, "kv": kv_map, "row": row_map}


def forward(
    query: jax.Array,
    key: jax.Array,
    value: jax.Array,
    sinks: jax.Array | None,
    segment_ids: SegmentIds,
    cfg: FlashConfig,
) -> tuple[jax.Array, KernelLayout]:
    """Forward pass.

    Args:
        query: ``[B, T, N, H]``; key: ``[B, S, K, H]``; value: ``[B, S, K, Hv]``.
        sinks: ``[N]`` sink logits (``cfg.has_sinks``), or ``None``.
        segment_ids: ``(q_ids [B, T], kv_ids [B, S])`` int32, or ``None``.

    Returns:
        ``out [B, T, N, Hv]`` and the residuals in the kernel layout, as the backward kernels
        read them: ``q`` ``[B, Tp, N·Hp]``, ``k`` ``[B, Sp, K·Hp]``, ``v`` ``[B, Sp, K·Hvp]``,
        ``out`` ``[B, Tp, N·Hvp]`` and the log-sum-exp ``[B, N, 1, Tp]`` float32, the sink
        included (``+inf`` for rows that see no key).
    """
    bq, bk = cfg.blocks.block_q, cfg.blocks.block_kv
    tp, sp, hp, heads = cfg.q_len_padded, cfg.kv_len_padded, cfg.head_dim_padded, cfg.heads_per_step
    hvp = cfg.v_head_dim_padded
    # The kernels scale q once per query block in VMEM: scaling here would be a pass over q
    # of its own on TPU (XLA does not fuse it into the relayout copy).
    q = _layout.to_kernel(query, tp, hp)
    k = _layout.to_kernel(key, sp, hp)
    v = _layout.to_kernel(value, sp, hvp)
    ops, ranges, maps = _query_major(cfg, bq, bk, segment_ids)
    ops.inputs += [
        ("q", pl.BlockSpec((None, bq, heads * hp), maps["q"]), q),
        ("k", pl.BlockSpec((None, bk, hp), maps["kv"]), k),
        ("v", pl.BlockSpec((None, bk, hvp), maps["kv"]), v),
    ]
    if cfg.has_sinks and sinks is not None:
        # One lane-replicated row per query head; a step reads its P heads' rows.
        rows = jnp.broadcast_to(sinks.astype(jnp.float32)[:, None, None], (cfg.num_heads, 1, LANES))
        ops.inputs.append(
            ("sinks", pl.BlockSpec((heads, 1, LANES), lambda b, c, i, j, *pre: (c, 0, 0)), rows)
        )
    ops.outputs += [
        (
            "o",
            pl.BlockSpec((None, bq, heads * hvp), maps["q"]),
            jax.ShapeDtypeStruct((cfg.batch, tp, cfg.num_heads * hvp), q.dtype),
        ),
        (
            "lse",
            pl.BlockSpec((None, heads, 1, bq), maps["row"]),
            jax.ShapeDtypeStruct((cfg.batch, cfg.num_heads, 1, tp), jnp.float32),
        ),
    ]
    ops.scratch += [
        ("m", pltpu.VMEM((heads, bq, LANES), jnp.float32)),  # running max
        ("l", pltpu.VMEM((heads, bq, LANES), jnp.float32)),  # normaliser
        ("acc", pltpu.VMEM((heads, bq, hvp), jnp.float32)),  # unnormalised output
        ("q_scaled", pltpu.VMEM((bq, heads * hp), q.dtype)),
    ]
    out, lse = call(
        forward_kernel,
        ops,
        grid=(cfg.batch, cfg.head_steps, tp // bq, ranges.steps),
        semantics=QUERY_MAJOR,
        cfg=cfg,
        cost=_cost.forward_cost(cfg),
        name="zoo_flash_tpu_forward",
        block_q=bq,
        block_kv=bk,
        steps=ranges.steps,
    )
    attended = _layout.from_kernel(out, cfg.q_len, cfg.num_heads, cfg.v_head_dim)
    return attended, (q, k, v, out, lse)


def backward_delta(out: jax.Array, d_out: jax.Array, cfg: FlashConfig) -> jax.Array:
    """``rowsum(dO * O)`` ``[B, N, 1, Tp]`` float32 from both in the kernel layout."""
    bq, hp = cfg.blocks.block_q_bwd, cfg.v_head_dim_padded
    nq = cfg.q_len_padded // bq
    block = pl.BlockSpec((None, bq, hp), lambda b, n, i: (b, i, n))
    rows = cfg.batch * cfg.num_heads * cfg.q_len_padded
    return pl.pallas_call(
        delta_kernel,
        grid=(cfg.batch, cfg.num_heads, nq),
        in_specs=[block, block],
        out_specs=pl.BlockSpec((None, None, 1, bq), lambda b, n, i: (b, n, 0, i)),
        out_shape=jax.ShapeDtypeStruct(
            (cfg.batch, cfg.num_heads, 1, cfg.q_len_padded), jnp.float32
        ),
        compiler_params=pltpu.CompilerParams(
            dimension_semantics=("parallel", "parallel", "parallel"),
            vmem_limit_bytes=cfg.vmem_limit_bytes,
        ),
        cost_estimate=pl.CostEstimate(
            flops=2 * rows * hp,
            transcendentals=0,
            bytes_accessed=2 * rows * hp * cfg.itemsize + 4 * rows,
        ),
        interpret=cfg.interpret if cfg.interpret is not None else False,
        name="zoo_flash_tpu_backward_delta",
    )(out, d_out)


def backward_dq(
    q: jax.Array,
    k: jax.Array,
    v: jax.Array,
    do: jax.Array,
    lse: jax.Array,
    delta: jax.Array,
    segment_ids: SegmentIds,
    cfg: FlashConfig,
) -> jax.Array:
    """dQ ``[B, T, N, H]`` from kernel-layout q, k, v, dO and the lse/delta rows."""
    bq, bk = cfg.blocks.block_q_bwd, cfg.blocks.block_kv_bwd
    hp, heads, hvp = cfg.head_dim_padded, cfg.heads_per_step, cfg.v_head_dim_padded
    ops, ranges, maps = _query_major(cfg, bq, bk, segment_ids)
    ops.inputs += [
        ("q", pl.BlockSpec((None, bq, heads * hp), maps["q"]), q),
        ("k", pl.BlockSpec((None, bk, hp), maps["kv"]), k),
        ("v", pl.BlockSpec((None, bk, hvp), maps["kv"]), v),
        ("do", pl.BlockSpec((None, bq, heads * hvp), maps["q"]), do),
        ("lse", pl.BlockSpec((None, heads, 1, bq), maps["row"]), lse),
        ("delta", pl.BlockSpec((None, heads, 1, bq), maps["row"]), delta),
    ]
    ops.outputs.append(
        (
            "dq",
            pl.BlockSpec((None, bq, heads * hp), maps["q"]),
            jax.ShapeDtypeStruct(q.shape, q.dtype),
        )
    )
    ops.scratch += [
        ("acc", pltpu.VMEM((heads, bq, hp), jnp.float32)),
        ("lse_col", pltpu.VMEM((heads, bq, LANES), jnp.float32)),
        ("delta_col", pltpu.VMEM((heads, bq, LANES), jnp.float32)),
        ("q_scaled", pltpu.VMEM((bq, heads * hp), q.dtype)),
    ]
    (dq,) = call(
        dq_kernel,
        ops,
        grid=(cfg.batch, cfg.head_steps, cfg.q_len_padded // bq, ranges.steps),
        semantics=QUERY_MAJOR,
        cfg=cfg,
        cost=_cost.dq_cost(cfg),
        name="zoo_flash_tpu_backward_dq",
        block_q=bq,
        block_kv=bk,
        steps=ranges.steps,
    )
    return _layout.from_kernel(dq, cfg.q_len, cfg.num_heads, cfg.head_dim)


def backward_dkdv(
    q: jax.Array,
    k: jax.Array,
    v: jax.Array,
    do: jax.Array,
    lse: jax.Array,
    delta: jax.Array,
    segment_ids: SegmentIds,
    cfg: FlashConfig,
) -> tuple[jax.Array, jax.Array]:
    """dK ``[B, S, K, H]`` and dV ``[B, S, K, Hv]``, summed over the query heads of each group
    in VMEM."""
    bq, bk = cfg.blocks.block_q_bwd, cfg.blocks.block_kv_bwd
    hp, g, hvp = cfg.head_dim_padded, cfg.group_size, cfg.v_head_dim_padded
    nk = cfg.kv_len_padded // bk
    seg, id_rows = _segments(cfg, segment_ids, bq, bk)
    ranges = q_ranges(cfg, bq, bk, seg)

    ops = Operands()
    visit = _prefetch(ops, ranges, seg)

    def kv_map(
        b: jax.Array, h: jax.Array, jb: jax.Array, gi: jax.Array, i: jax.Array, *pre: Any
    ) -> BlockIndex:
        return b, jb, h

    def q_map(
        b: jax.Array, h: jax.Array, jb: jax.Array, gi: jax.Array, i: jax.Array, *pre: Any
    ) -> BlockIndex:
        return b, visit(b * nk + jb, i, pre), h * g + gi

    def row_map(
        b: jax.Array, h: jax.Array, jb: jax.Array, gi: jax.Array, i: jax.Array, *pre: Any
    ) -> BlockIndex:
        return b, h * g + gi, 0, visit(b * nk + jb, i, pre)

    ops.inputs += [
        ("q", pl.BlockSpec((None, bq, hp), q_map), q),
        ("k", pl.BlockSpec((None, bk, hp), kv_map), k),
        ("v", pl.BlockSpec((None, bk, hvp), kv_map), v),
        ("do", pl.BlockSpec((None, bq, hvp), q_map), do),
        ("lse", pl.BlockSpec((None, None, 1, bq), row_map), lse),
        ("delta", pl.BlockSpec((None, None, 1, bq), row_map), delta),
    ]
    ops.outputs += [
        ("dk", pl.BlockSpec((None, bk, hp), kv_map), jax.ShapeDtypeStruct(k.shape, k.dtype)),
        ("dv", pl.BlockSpec((None, bk, hvp), kv_map), jax.ShapeDtypeStruct(v.shape, v.dtype)),
    ]
    ops.scratch += [
        ("dk_acc", pltpu.VMEM((bk, hp), jnp.float32)),
        ("dv_acc", pltpu.VMEM((bk, hvp), jnp.float32)),
        ("k_scaled", pltpu.VMEM((bk, hp), k.dtype)),
    ]
    if seg is not None:
        ops.inputs += [
            (
                "q_ids",
                pl.BlockSpec(
                    (None, 1, bq), lambda b, h, jb, gi, i, *pre: (b, 0, visit(b * nk + jb, i, pre))
                ),
                id_rows[0],
            ),
            (
                "kv_ids",
                pl.BlockSpec((None, 1, bk), lambda b, h, jb, gi, i, *pre: (b, 0, jb)),
                id_rows[1],
            ),
        ]
        ops.scratch.append(("kv_ids_col", pltpu.VMEM((bk, LANES), jnp.int32)))
    dk, dv = call(
        dkdv_kernel,
        ops,
        grid=(cfg.batch, cfg.num_kv_heads, nk, g, ranges.steps),
        semantics=("parallel", "parallel", "parallel", "arbitrary", "arbitrary"),
        cfg=cfg,
        cost=_cost.dkdv_cost(cfg),
        name="zoo_flash_tpu_backward_dkdv",
        block_q=bq,
        block_kv=bk,
        steps=ranges.steps,
    )
    return (
        _layout.from_kernel(dk, cfg.kv_len, cfg.num_kv_heads, cfg.head_dim),
        _layout.from_kernel(dv, cfg.kv_len, cfg.num_kv_heads, cfg.v_head_dim),
    )
