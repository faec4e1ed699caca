"""The ``pallas_call`` wrappers: layouts, grids, BlockSpecs and compiler settings of each kernel.

Every index map receives the grid indices followed by the scalar-prefetched block ranges
(SMEM). Key/value BlockSpecs map query head ``n`` to key/value head ``n // G``; the block
index along a visited axis is ``min(lo + step, max(hi, lo))``, so steps past a row's last block
fetch nothing new. Index maps divide with ``lax.div``: Python's ``//`` on a traced integer lowers
through a query of the default device's TPU generation, which fails when compiling for a TPU
from a CPU host.
"""

from __future__ import annotations

import functools

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

SegmentIds = tuple[jax.Array, jax.Array] | None


def _kv_head(n: jax.Array, group: int) -> jax.Array:
    """Key/value head of query head ``n`` (``n // group``; both non-negative)."""
    return jax.lax.div(n, jnp.int32(group))


def _visited(lo: jax.Array, hi: jax.Array, row: jax.Array, step: jax.Array) -> jax.Array:
    start = lo[row]
    return jnp.minimum(start + step, jnp.maximum(hi[row], start))


def _prefetch(ranges: BlockRanges, seg: SegmentBounds | None) -> list[jax.Array]:
    scalars = [ranges.lo, ranges.hi]
    if seg is not None:
        scalars += [seg.q_min, seg.q_max, seg.kv_min, seg.kv_max]
    return scalars


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


def _compiler_params(cfg: FlashConfig, semantics: tuple[str, ...]) -> pltpu.CompilerParams:
    return pltpu.CompilerParams(
        dimension_semantics=semantics, vmem_limit_bytes=cfg.vmem_limit_bytes
    )


def forward(
    query: jax.Array, key: jax.Array, value: jax.Array, segment_ids: SegmentIds, cfg: FlashConfig
) -> tuple[jax.Array, jax.Array]:
    """Forward pass.

    Args:
        query: ``[B, T, N, H]``; key, value: ``[B, S, K, H]``.
        segment_ids: ``(q_ids [B, T], kv_ids [B, S])`` int32, or ``None``.

    Returns:
        ``out [B, T, N, H]``, the same in the kernel layout ``[B, Tp, N * Hp]`` (kept for the
        backward) and the log-sum-exp ``[B, N, 1, Tp]`` float32 (``+inf`` for rows that see
        no key).
    """
    bq, bk = cfg.blocks.block_q, cfg.blocks.block_kv
    tp, sp, hp, g = cfg.q_len_padded, cfg.kv_len_padded, cfg.head_dim_padded, cfg.group_size
    nq = tp // bq
    q = _layout.to_kernel(query, tp, hp)
    k = _layout.to_kernel(key, sp, hp)
    v = _layout.to_kernel(value, sp, hp)
    seg, id_rows = _segments(cfg, segment_ids, bq, bk)
    ranges = kv_ranges(cfg, bq, bk, seg)

    def q_map(b, n, i, j, *pre):  # type: ignore[no-untyped-def]
        return b, i, n

    def kv_map(b, n, i, j, lo, hi, *pre):  # type: ignore[no-untyped-def]
        return b, _visited(lo, hi, b * nq + i, j), _kv_head(n, g)

    def kv_ids_map(b, n, i, j, lo, hi, *pre):  # type: ignore[no-untyped-def]
        return b, 0, _visited(lo, hi, b * nq + i, j)

    in_specs = [
        pl.BlockSpec((None, bq, hp), q_map),
        pl.BlockSpec((None, bk, hp), kv_map),
        pl.BlockSpec((None, bk, hp), kv_map),
    ]
    scratch = [
        pltpu.VMEM((bq, LANES), jnp.float32),  # running max m
        pltpu.VMEM((bq, LANES), jnp.float32),  # normaliser l
        pltpu.VMEM((bq, hp), jnp.float32),  # unnormalised output
    ]
    if seg is not None:
        in_specs += [
            pl.BlockSpec((None, 1, bq), lambda b, n, i, j, *pre: (b, 0, i)),
            pl.BlockSpec((None, 1, bk), kv_ids_map),
        ]
        scratch.append(pltpu.VMEM((bq, LANES), jnp.int32))
    grid_spec = pltpu.PrefetchScalarGridSpec(
        num_scalar_prefetch=6 if seg is not None else 2,
        grid=(cfg.batch, cfg.num_heads, nq, ranges.steps),
        in_specs=in_specs,
        out_specs=[
            pl.BlockSpec((None, bq, hp), q_map),
            pl.BlockSpec((None, None, 1, bq), lambda b, n, i, j, *pre: (b, n, 0, i)),
        ],
        scratch_shapes=scratch,
    )
    kernel = functools.partial(forward_kernel, cfg=cfg, block_q=bq, block_kv=bk, steps=ranges.steps)
    out, lse = pl.pallas_call(
        kernel,
        grid_spec=grid_spec,
        out_shape=[
            jax.ShapeDtypeStruct(q.shape, q.dtype),
            jax.ShapeDtypeStruct((cfg.batch, cfg.num_heads, 1, tp), jnp.float32),
        ],
        compiler_params=_compiler_params(cfg, ("parallel", "parallel", "parallel", "arbitrary")),
        cost_estimate=_cost.forward_cost(cfg),
        interpret=cfg.interpret if cfg.interpret is not None else False,
        name="zoo_flash_tpu_forward",
    )(*_prefetch(ranges, seg), q, k, v, *id_rows)
    return _layout.from_kernel(out, cfg.q_len, cfg.num_heads, cfg.head_dim), out, lse


def backward_delta(out: jax.Array, d_out: jax.Array, cfg: FlashConfig) -> jax.Array:
    """``rowsum(dO * O)`` ``[B, N, 1, Tp]`` float32 from both in the kernel layout."""
    bq, hp = cfg.blocks.block_q_bwd, cfg.head_dim_padded
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
        compiler_params=_compiler_params(cfg, ("parallel", "parallel", "parallel")),
        cost_estimate=pl.CostEstimate(
            flops=2 * rows * hp,
            transcendentals=0,
            bytes_accessed=2 * rows * hp * cfg.itemsize + 4 * rows,
        ),
        interpret=cfg.interpret if cfg.interpret is not None else False,
        name="zoo_flash_tpu_backward_delta",
    )(out, d_out)


def backward_inputs(
    query: jax.Array, key: jax.Array, value: jax.Array, d_out: jax.Array, cfg: FlashConfig
) -> tuple[jax.Array, ...]:
    """q, k, v and dO in the kernel layout (shared by the three backward kernels)."""
    tp, sp, hp = cfg.q_len_padded, cfg.kv_len_padded, cfg.head_dim_padded
    return (
        _layout.to_kernel(query, tp, hp),
        _layout.to_kernel(key, sp, hp),
        _layout.to_kernel(value, sp, hp),
        _layout.to_kernel(d_out.astype(query.dtype), tp, hp),
    )


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
    """dQ ``[B, T, N, H]`` from kernel-layout q, k, v, dO and the lse and delta rows."""
    bq, bk = cfg.blocks.block_q_bwd, cfg.blocks.block_kv_bwd
    hp, g = cfg.head_dim_padded, cfg.group_size
    nq = cfg.q_len_padded // bq
    seg, id_rows = _segments(cfg, segment_ids, bq, bk)
    ranges = kv_ranges(cfg, bq, bk, seg)

    def q_map(b, n, i, j, *pre):  # type: ignore[no-untyped-def]
        return b, i, n

    def kv_map(b, n, i, j, lo, hi, *pre):  # type: ignore[no-untyped-def]
        return b, _visited(lo, hi, b * nq + i, j), _kv_head(n, g)

    def row_map(b, n, i, j, *pre):  # type: ignore[no-untyped-def]
        return b, n, 0, i

    in_specs = [
        pl.BlockSpec((None, bq, hp), q_map),
        pl.BlockSpec((None, bk, hp), kv_map),
        pl.BlockSpec((None, bk, hp), kv_map),
        pl.BlockSpec((None, bq, hp), q_map),
        pl.BlockSpec((None, None, 1, bq), row_map),
        pl.BlockSpec((None, None, 1, bq), row_map),
    ]
    scratch = [
        pltpu.VMEM((bq, hp), jnp.float32),  # dq accumulator
        pltpu.VMEM((bq, LANES), jnp.float32),  # lse as a column
        pltpu.VMEM((bq, LANES), jnp.float32),  # delta as a column
    ]
    if seg is not None:
        in_specs += [
            pl.BlockSpec((None, 1, bq), lambda b, n, i, j, *pre: (b, 0, i)),
            pl.BlockSpec(
                (None, 1, bk),
                lambda b, n, i, j, lo, hi, *pre: (b, 0, _visited(lo, hi, b * nq + i, j)),
            ),
        ]
        scratch.append(pltpu.VMEM((bq, LANES), jnp.int32))
    grid_spec = pltpu.PrefetchScalarGridSpec(
        num_scalar_prefetch=6 if seg is not None else 2,
        grid=(cfg.batch, cfg.num_heads, nq, ranges.steps),
        in_specs=in_specs,
        out_specs=pl.BlockSpec((None, bq, hp), q_map),
        scratch_shapes=scratch,
    )
    kernel = functools.partial(dq_kernel, cfg=cfg, block_q=bq, block_kv=bk, steps=ranges.steps)
    dq = pl.pallas_call(
        kernel,
        grid_spec=grid_spec,
        out_shape=jax.ShapeDtypeStruct(q.shape, q.dtype),
        compiler_params=_compiler_params(cfg, ("parallel", "parallel", "parallel", "arbitrary")),
        cost_estimate=_cost.dq_cost(cfg),
        interpret=cfg.interpret if cfg.interpret is not None else False,
        name="zoo_flash_tpu_backward_dq",
    )(*_prefetch(ranges, seg), q, k, v, do, lse, delta, *id_rows)
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
    """dK and dV ``[B, S, K, H]``, summed over the query heads of each group in VMEM."""
    bq, bk = cfg.blocks.block_q_bwd, cfg.blocks.block_kv_bwd
    hp, g = cfg.head_dim_padded, cfg.group_size
    nk = cfg.kv_len_padded // bk
    seg, id_rows = _segments(cfg, segment_ids, bq, bk)
    ranges = q_ranges(cfg, bq, bk, seg)

    def kv_map(b, h, jb, gi, i, *pre):  # type: ignore[no-untyped-def]
        return b, jb, h

    def q_map(b, h, jb, gi, i, lo, hi, *pre):  # type: ignore[no-untyped-def]
        return b, _visited(lo, hi, b * nk + jb, i), h * g + gi

    def row_map(b, h, jb, gi, i, lo, hi, *pre):  # type: ignore[no-untyped-def]
        return b, h * g + gi, 0, _visited(lo, hi, b * nk + jb, i)

    in_specs = [
        pl.BlockSpec((None, bq, hp), q_map),
        pl.BlockSpec((None, bk, hp), kv_map),
        pl.BlockSpec((None, bk, hp), kv_map),
        pl.BlockSpec((None, bq, hp), q_map),
        pl.BlockSpec((None, None, 1, bq), row_map),
        pl.BlockSpec((None, None, 1, bq), row_map),
    ]
    scratch = [pltpu.VMEM((bk, hp), jnp.float32), pltpu.VMEM((bk, hp), jnp.float32)]
    if seg is not None:
        in_specs += [
            pl.BlockSpec(
                (None, 1, bq),
                lambda b, h, jb, gi, i, lo, hi, *pre: (b, 0, _visited(lo, hi, b * nk + jb, i)),
            ),
            pl.BlockSpec((None, 1, bk), lambda b, h, jb, gi, i, *pre: (b, 0, jb)),
        ]
        scratch.append(pltpu.VMEM((bk, LANES), jnp.int32))
    grid_spec = pltpu.PrefetchScalarGridSpec(
        num_scalar_prefetch=6 if seg is not None else 2,
        grid=(cfg.batch, cfg.num_kv_heads, nk, g, ranges.steps),
        in_specs=in_specs,
        out_specs=[pl.BlockSpec((None, bk, hp), kv_map), pl.BlockSpec((None, bk, hp), kv_map)],
        scratch_shapes=scratch,
    )
    kernel = functools.partial(dkdv_kernel, cfg=cfg, block_q=bq, block_kv=bk, steps=ranges.steps)
    dk, dv = pl.pallas_call(
        kernel,
        grid_spec=grid_spec,
        out_shape=[
            jax.ShapeDtypeStruct(k.shape, k.dtype),
            jax.ShapeDtypeStruct(v.shape, v.dtype),
        ],
        compiler_params=_compiler_params(
            cfg, ("parallel", "parallel", "parallel", "arbitrary", "arbitrary")
        ),
        cost_estimate=_cost.dkdv_cost(cfg),
        interpret=cfg.interpret if cfg.interpret is not None else False,
        name="zoo_flash_tpu_backward_dkdv",
    )(*_prefetch(ranges, seg), q, k, v, do, lse, delta, *id_rows)
    return (
        _layout.from_kernel(dk, cfg.kv_len, cfg.num_kv_heads, cfg.head_dim),
        _layout.from_kernel(dv, cfg.kv_len, cfg.num_kv_heads, cfg.head_dim),
    )
