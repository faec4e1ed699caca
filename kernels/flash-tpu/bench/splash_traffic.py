"""JAX's splash attention: modelled HBM traffic of one causal forward, from its own mask info.

Splash (``jax.experimental.pallas.ops.tpu.splash_attention``) plans its grid in
``splash_attention_mask_info.process_mask``: for a causal mask and block sizes ``(bq, bkv)``
it returns, per query-block row, ``block_mask`` (0: skip, 1: partial, 2: full) and
``data_next`` (the key block the ``k``/``v`` index maps fetch at each grid step; steps past a
row's last block point at the next row's first, so they fetch nothing new). The forward grid
is ``(heads, q blocks, width)`` per sequence, batched by ``jax.vmap``; the key/value index
map sends query head ``h`` to key/value head ``h // G`` (``make_splash_mha``), so every query
head walks its own row of key blocks: a key/value block is fetched once per query head, as in
zoo_flash_tpu 0.1.x, whatever the GQA group.

The model counts, per forward call (``save_residuals=False``, as a forward-only call runs):
one ``k`` and one ``v`` block per working grid step (the rule zoo_flash_tpu's own cost model
uses, so the three kernels are counted alike); each ``q`` block read and ``o`` block written
once per row; the ``(bq, 128)`` int32 block of query positions that the causal mask function
reads once per row (``MaskInfo.q_sequence``); the three float32 ``m``/``l``/``o`` scratch
outputs once per sequence. The scalar-prefetched mask tables (SMEM, under 0.2 MiB here) are
left out. :func:`kv_block_fetches` replays the index maps to check the rule.
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np
from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_kernel as kernel
from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_mask as mask_lib
from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_mask_info as info_lib

MiB = 2**20
LANES = 128  # splash's NUM_LANES: the minor dim of its query-position and scratch blocks


def causal_mask(seq_len: int, num_heads: int) -> mask_lib.MultiHeadMask:
    """The mask a causal splash user builds: one lazy ``CausalMask`` per query head."""
    return mask_lib.MultiHeadMask([mask_lib.CausalMask((seq_len, seq_len))] * num_heads)


def default_blocks() -> kernel.BlockSizes:
    """What ``make_splash_mha`` uses when no ``block_sizes`` are passed."""
    return kernel.BlockSizes.get_default()


def forward_mask_info(seq_len: int, num_heads: int, blocks: kernel.BlockSizes) -> info_lib.MaskInfo:
    """The forward ``MaskInfo`` exactly as ``make_splash_mha`` builds it on one device."""
    info, _ = info_lib.process_mask(
        causal_mask(seq_len, num_heads),
        (blocks.block_q, blocks.block_kv),
        head_shards=1,
        q_seq_shards=1,
    )
    return info


def _per_head(table: np.ndarray | jax.Array | None, num_heads: int) -> np.ndarray:
    """A mask-info table ``[1 or heads, rows, width]`` as one ``[rows, width]`` per head."""
    assert table is not None  # typed optional; a static mask always has these tables
    table = np.asarray(table, dtype=np.int32)
    return np.broadcast_to(table, (num_heads, *table.shape[1:]))


def kv_block_fetches(info: info_lib.MaskInfo, num_heads: int, group: int, batch: int) -> int:
    """Key blocks fetched by replaying the forward grid's ``k`` index map in grid order.

    Pallas fetches a block only when its index differs from the previous step's, so the count
    is the number of changes of ``(h // group, data_next[h, i, j])`` over ``(h, i, j)``, once
    per sequence of the batch (``vmap`` makes the batch the outermost grid axis).
    """
    blocks = _per_head(info.data_next, num_heads).reshape(-1)
    per_head = blocks.size // num_heads
    kv_head = np.repeat(np.arange(num_heads) // group, per_head)
    changes = (blocks[1:] != blocks[:-1]) | (kv_head[1:] != kv_head[:-1])
    return batch * (1 + int(np.count_nonzero(changes)))


def forward_figures(
    seq_len: int,
    num_heads: int,
    group: int,
    *,
    batch: int = 2,
    head_dim: int = 128,
    itemsize: int = 2,
    blocks: kernel.BlockSizes | None = None,
) -> dict[str, Any]:
    """K/V MiB, total MiB and grid steps of one causal splash forward (see the module notes)."""
    blocks = blocks or default_blocks()
    bq, bkv = blocks.block_q, blocks.block_kv
    info = forward_mask_info(seq_len, num_heads, blocks)
    block_mask = _per_head(info.block_mask, num_heads)
    working = batch * int(np.count_nonzero(block_mask))
    rows, width = block_mask.shape[1:]
    q_side = batch * num_heads * seq_len * head_dim * itemsize
    kv = working * 2 * bkv * head_dim * itemsize
    positions = 0 if info.q_sequence is None else batch * num_heads * seq_len * LANES * 4
    scratch = batch * (2 * bq * LANES + bq * head_dim) * 4
    return {
        "blocks": f"{bq}x{bkv}",
        "heads_per_step": 1,
        "kv_mib": kv / MiB,
        "total_mib": (2 * q_side + kv + positions + scratch) / MiB,
        "positions_mib": positions / MiB,
        "steps": working,
        "grid_steps": batch * num_heads * rows * width,
        "kv_fetches": kv_block_fetches(info, num_heads, group, batch),
    }
