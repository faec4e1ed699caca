"""What the kernel plans for one call, without tracing or compiling it.

Blocks, heads per grid step, the scoped VMEM limit, the policy's VMEM estimates and the forward's
modelled HBM traffic (the bytes its ``pl.CostEstimate`` declares to XLA): for benchmarks and
capacity planning, from any host.
"""

from __future__ import annotations

import dataclasses

import jax

from ._api import make_config
from ._cost import forward_cost, forward_kv_bytes
from ._mask_info import visited_blocks
from ._policy import (
    BlockSizes,
    backward_vmem_bytes,
    choose_block_sizes,
    forward_vmem_bytes,
    generation_for,
)


@dataclasses.dataclass(frozen=True)
class CallPlan:
    """The plan of one ``flash_attention`` call and its modelled forward traffic.

    Attributes:
        blocks: the block sizes the call uses.
        heads_per_step: query heads the forward and dQ kernels take per grid step.
        vmem_limit_bytes: the scoped VMEM limit every Mosaic kernel of the call gets.
        forward_vmem_bytes: the policy's estimate of one forward grid step's VMEM working set.
        backward_vmem_bytes: the same for the larger of the dQ and dK/dV grid steps.
        forward_kv_bytes: key and value bytes one forward fetches from HBM: one ``k`` and one
            ``v`` block per working grid step (a step that repeats a block fetches nothing).
        forward_bytes: all HBM bytes of one forward: ``q`` read and ``o`` written once, the
            key/value blocks, the float32 log-sum-exp row.
        forward_steps: forward grid steps that compute (visited block pairs x batch x head
            steps); blocks the causal mask or window skips are not counted, segment ids can
            only lower it.
    """

    blocks: BlockSizes
    heads_per_step: int
    vmem_limit_bytes: int
    forward_vmem_bytes: int
    backward_vmem_bytes: int
    forward_kv_bytes: int
    forward_bytes: int
    forward_steps: int


def plan_call(
    query: jax.ShapeDtypeStruct | jax.Array,
    key: jax.ShapeDtypeStruct | jax.Array,
    *,
    device_kind: str,
    is_causal: bool = False,
    local_window: tuple[int, int] | None = None,
    block_sizes: BlockSizes | None = None,
    heads_per_step: int | None = None,
) -> CallPlan:
    """The plan of ``flash_attention(query, key, key, ...)`` on ``device_kind``.

    Args:
        query: ``[B, T, N, H]`` shape and dtype (an array or a ``jax.ShapeDtypeStruct``).
        key: ``[B, S, K, H]``, ``N % K == 0``.
        device_kind: the TPU generation planned for (``"TPU v5 lite"``...).
        is_causal, local_window: as for ``flash_attention``.
        block_sizes: override the policy's block sizes.
        heads_per_step: override the query heads per grid step (a divisor of ``N / K``);
            without ``block_sizes`` the blocks are then planned for that many heads, so
            ``heads_per_step=1`` gives the grid of 0.1.x, one query head per step.

    Returns:
        A :class:`CallPlan`.
    """
    cfg = make_config(
        query, key, scale=1.0, is_causal=is_causal, has_segments=False,
        local_window=local_window, logits_soft_cap=None, block_sizes=block_sizes,
        device_kind=device_kind,
    )  # fmt: skip
    if heads_per_step is not None:
        blocks = block_sizes or choose_block_sizes(
            generation_for(device_kind), q_len=cfg.q_len, kv_len=cfg.kv_len,
            head_dim=cfg.head_dim, itemsize=cfg.itemsize, heads=heads_per_step,
        )  # fmt: skip
        cfg = dataclasses.replace(cfg, heads_per_step=heads_per_step, blocks=blocks)
    b, h, heads = cfg.blocks, cfg.head_dim_padded, cfg.heads_per_step
    steps = visited_blocks(cfg, b.block_q, b.block_kv) * cfg.batch * cfg.head_steps
    return CallPlan(
        blocks=b,
        heads_per_step=heads,
        vmem_limit_bytes=cfg.vmem_limit_bytes,
        forward_vmem_bytes=forward_vmem_bytes(
            b.block_q, b.block_kv, h, cfg.itemsize, heads, b.block_kv_compute
        ),
        backward_vmem_bytes=backward_vmem_bytes(
            b.block_q_bwd, b.block_kv_bwd, h, cfg.itemsize, heads, b.block_kv_bwd_compute
        ),
        forward_kv_bytes=forward_kv_bytes(cfg),
        forward_bytes=forward_cost(cfg).bytes_accessed,
        forward_steps=steps,
    )
