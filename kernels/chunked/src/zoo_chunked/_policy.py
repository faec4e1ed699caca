"""Block-size policy: how long the query and key/value blocks are, and how a length is split.

Sizes come from, in order: the kernel's constructor, the environment variables
``ZOO_CHUNKED_BLOCK_Q`` / ``ZOO_CHUNKED_BLOCK_KV``, then a per-platform default. A size is an
upper bound: a length is cut into ``ceil(length / size)`` equal blocks rounded up to a multiple
of 8, so padding stays below 8 rows per block instead of up to a whole block.
"""

from __future__ import annotations

import dataclasses
import math
import os

from zoo_attention import AttentionSpec

ENV_BLOCK_Q = "ZOO_CHUNKED_BLOCK_Q"
ENV_BLOCK_KV = "ZOO_CHUNKED_BLOCK_KV"

# (query block, key/value block) upper bounds per platform. CPU: measured, 256x256 keeps a
# block pair's logits in cache and was fastest from T=1k to 4k, forward and backward. GPU and
# TPU: not yet measured; 512 keeps the per-iteration launch overhead low at moderate memory.
DEFAULT_BLOCKS: dict[str, tuple[int, int]] = {
    "cpu": (256, 256),
    "gpu": (512, 512),
    "tpu": (512, 512),
}
_FALLBACK_BLOCKS = (512, 512)
_ALIGN = 8


@dataclasses.dataclass(frozen=True)
class BlockSizes:
    """Upper bounds on the query and key/value block lengths."""

    block_q: int
    block_kv: int


def positive_block(value: object, what: str) -> int:
    """``value`` if it is a positive int, else ``ValueError`` naming ``what``."""
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{what} must be a positive int, got {value!r}.")
    return value


def _from_env(var: str) -> int | None:
    raw = os.environ.get(var, "").strip()
    if not raw:
        return None
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value <= 0:
        raise ValueError(
            f"{var}={raw!r} must be a positive integer block length; unset it or fix it."
        )
    return value


def resolve_block_sizes(
    platform: str, block_q: int | None = None, block_kv: int | None = None
) -> BlockSizes:
    """Block-size bounds for ``platform``: explicit values, else the environment, else defaults.

    Raises:
        ValueError: an explicit value or an environment variable is not a positive integer.
    """
    default_q, default_kv = DEFAULT_BLOCKS.get(platform, _FALLBACK_BLOCKS)
    if block_q is not None:
        q = positive_block(block_q, "`block_q`")
    else:
        q = _from_env(ENV_BLOCK_Q) or default_q
    if block_kv is not None:
        kv = positive_block(block_kv, "`block_kv`")
    else:
        kv = _from_env(ENV_BLOCK_KV) or default_kv
    return BlockSizes(q, kv)


def split_length(length: int, max_block: int) -> tuple[int, int]:
    """``(block, num_blocks)`` covering ``length`` with blocks of at most about ``max_block``.

    One block of exactly ``length`` when it fits (no padding); otherwise ``ceil(length /
    max_block)`` equal blocks, each rounded up to a multiple of 8 (when ``max_block >= 8``).
    """
    if length <= max_block:
        return length, 1
    num = math.ceil(length / max_block)
    block = math.ceil(length / num)
    align = _ALIGN if max_block >= _ALIGN else 1
    block = math.ceil(block / align) * align
    return block, math.ceil(length / block)


@dataclasses.dataclass(frozen=True)
class Plan:
    """The static tiling of one call: the spec plus block lengths and counts.

    Hashable, so it is the static argument of the ``custom_vjp``.
    """

    spec: AttentionSpec
    block_q: int
    num_q_blocks: int
    block_kv: int
    num_kv_blocks: int

    @property
    def padded_q_len(self) -> int:
        return self.block_q * self.num_q_blocks

    @property
    def padded_kv_len(self) -> int:
        return self.block_kv * self.num_kv_blocks

    @property
    def kv_tail(self) -> bool:
        """Whether the last key block holds padding that must be masked."""
        return self.padded_kv_len != self.spec.kv_len

    @property
    def has_mask(self) -> bool:
        """Whether any block pair needs a mask at all."""
        spec = self.spec
        return (
            spec.is_causal or spec.local_window is not None or spec.has_segment_ids or self.kv_tail
        )

    @property
    def can_skip_mask(self) -> bool:
        """Whether some block pairs may be fully visible (no segment ids to look at)."""
        return self.has_mask and not self.spec.has_segment_ids


def make_plan(spec: AttentionSpec, sizes: BlockSizes) -> Plan:
    """Tile ``spec`` with blocks no longer than ``sizes``."""
    bq, nq = split_length(spec.q_len, sizes.block_q)
    bk, nk = split_length(spec.kv_len, sizes.block_kv)
    return Plan(spec, bq, nq, bk, nk)
