"""The static configuration every kernel, wrapper and cost estimate of one call shares."""

from __future__ import annotations

import dataclasses
from typing import Any

import jax.numpy as jnp

from ._policy import BlockSizes, lcm, padded_head_dim, round_up


@dataclasses.dataclass(frozen=True)
class FlashConfig:
    """Shapes, features, blocks and compiler settings of one flash-attention call.

    Hashable, so it is the static (non-differentiable) argument of the ``custom_vjp``.

    Attributes:
        batch, q_len, kv_len, num_heads, num_kv_heads, head_dim: the contract's B, T, S, N, K, H.
        dtype: input dtype name (``"float32"`` or ``"bfloat16"``).
        scale: multiplies the logits.
        causal: top-left aligned causal mask.
        window: ``(left, right)`` local window, or ``None``.
        soft_cap: logits soft cap, or ``None``.
        has_segments: whether segment ids are passed.
        blocks: the block sizes.
        vmem_limit_bytes: scoped VMEM limit passed to Mosaic.
        interpret: ``None`` to compile with Mosaic, else the ``pltpu.InterpretParams``.
        heads_per_step: query heads of one group the forward and dQ kernels take per grid
            step against one key/value block (a divisor of the group size; see ``_policy``).
        q_offset: the position of query row 0 for the causal and window rules (contract
            1.2's query offset, static: the grid is planned from it); keys start at 0.
        value_head_dim: the values' (and output's) head dim when it differs from
            ``head_dim`` (contract 1.3, multi-head latent attention), else ``None``.
        has_sinks: one sink logit per query head joins each row's denominator (contract 1.3).
    """

    batch: int
    q_len: int
    kv_len: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    dtype: str
    scale: float
    causal: bool
    window: tuple[int, int] | None
    soft_cap: float | None
    has_segments: bool
    blocks: BlockSizes
    vmem_limit_bytes: int
    interpret: Any = None
    heads_per_step: int = 1
    q_offset: int = 0
    value_head_dim: int | None = None
    has_sinks: bool = False

    def __post_init__(self) -> None:
        if self.heads_per_step < 1 or self.group_size % self.heads_per_step:
            raise ValueError(
                f"heads_per_step={self.heads_per_step} must divide the group size "
                f"{self.group_size} (num_heads {self.num_heads} / kv heads {self.num_kv_heads})."
            )

    @property
    def group_size(self) -> int:
        """Query heads per key/value head."""
        return self.num_heads // self.num_kv_heads

    @property
    def head_steps(self) -> int:
        """Grid extent of the forward and dQ kernels' head axis: ``N / heads_per_step``."""
        return self.num_heads // self.heads_per_step

    @property
    def head_dim_padded(self) -> int:
        """Head dim padded to the lane width."""
        return padded_head_dim(self.head_dim)

    @property
    def v_head_dim(self) -> int:
        """The values' head dim, resolved."""
        return self.head_dim if self.value_head_dim is None else self.value_head_dim

    @property
    def v_head_dim_padded(self) -> int:
        """The values' head dim padded to the lane width."""
        return padded_head_dim(self.v_head_dim)

    @property
    def q_len_padded(self) -> int:
        """Query length padded to a multiple of both query block sizes."""
        return round_up(self.q_len, lcm(self.blocks.block_q, self.blocks.block_q_bwd))

    @property
    def kv_len_padded(self) -> int:
        """Key length padded to a multiple of both key block sizes."""
        return round_up(self.kv_len, lcm(self.blocks.block_kv, self.blocks.block_kv_bwd))

    @property
    def jnp_dtype(self) -> jnp.dtype:
        """The input dtype."""
        return jnp.dtype(self.dtype)

    @property
    def itemsize(self) -> int:
        """Bytes per input element."""
        return self.jnp_dtype.itemsize
