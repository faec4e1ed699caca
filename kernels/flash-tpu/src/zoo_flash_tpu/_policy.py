"""Block sizes per TPU generation: one table keyed by device kind, and a VMEM budget check.

The table holds what each generation is good at (preferred block sizes, the VMEM limit to ask
Mosaic for, the chip's peak for the benchmark). ``choose_block_sizes`` starts from the preferred
sizes, caps them at the (padded) sequence lengths and halves them until every kernel's
estimated working set fits the generation's VMEM budget. Callers override any of it by passing
their own :class:`BlockSizes`.
"""

from __future__ import annotations

import dataclasses
import math

LANES = 128  # every block edge is a multiple of the lane width
MiB = 1024 * 1024


@dataclasses.dataclass(frozen=True)
class BlockSizes:
    """Tile edges (in tokens) of the three kernels; each a positive multiple of 128.

    Attributes:
        block_q: query rows per forward block.
        block_kv: key rows per forward block.
        block_q_bwd: query rows per block of the dq and dk/dv kernels.
        block_kv_bwd: key rows per block of the dq and dk/dv kernels.
    """

    block_q: int = 512
    block_kv: int = 512
    block_q_bwd: int = 512
    block_kv_bwd: int = 512

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if not isinstance(value, int) or value <= 0 or value % LANES:
                raise ValueError(
                    f"BlockSizes.{field.name} must be a positive multiple of {LANES}, got {value!r}."
                )


@dataclasses.dataclass(frozen=True)
class Generation:
    """What the block-size policy knows about one TPU generation.

    Attributes:
        name: short name (``"v5e"``).
        vmem_bytes: VMEM per TensorCore.
        vmem_limit_bytes: the scoped VMEM limit passed to Mosaic (``vmem_limit_bytes``).
        peak_bf16_flops: peak bf16 FLOP/s of one JAX device (the benchmark's 100%).
        preferred: block sizes to start from before the VMEM check.
    """

    name: str
    vmem_bytes: int
    vmem_limit_bytes: int
    peak_bf16_flops: float
    preferred: BlockSizes

    @property
    def budget_bytes(self) -> int:
        """What a kernel's estimated working set may use: the limit less compiler headroom."""
        return int(self.vmem_limit_bytes * 0.75)


_V4 = Generation("v4", 16 * MiB, 14 * MiB, 275e12, BlockSizes(512, 512, 256, 512))
_V5E = Generation("v5e", 128 * MiB, 64 * MiB, 197e12, BlockSizes(512, 1024, 512, 512))
_V5P = Generation("v5p", 64 * MiB, 48 * MiB, 459e12, BlockSizes(512, 1024, 512, 512))
_V6E = Generation("v6e", 128 * MiB, 96 * MiB, 918e12, BlockSizes(1024, 1024, 512, 1024))

#: Keyed by ``jax.Device.device_kind``; each generation under every name libtpu reports.
GENERATIONS: dict[str, Generation] = {
    "TPU v4": _V4,
    "TPU v5 lite": _V5E,
    "TPU v5e": _V5E,
    "TPU v5": _V5P,
    "TPU v5p": _V5P,
    "TPU v6 lite": _V6E,
    "TPU v6e": _V6E,
}

#: Unknown TPU kinds get v4's conservative budget; interpret mode gets small blocks so CPU
#: runs stay fast and multi-block paths are exercised at small lengths.
FALLBACK = dataclasses.replace(_V4, name="unknown")
INTERPRET = Generation("interpret", 128 * MiB, 64 * MiB, 0.0, BlockSizes(128, 128, 128, 128))


def generation_for(device_kind: str | None) -> Generation:
    """The table entry for a device kind; ``None`` means interpret mode on a non-TPU backend."""
    if device_kind is None:
        return INTERPRET
    return GENERATIONS.get(device_kind, FALLBACK)


def round_up(x: int, multiple: int) -> int:
    """``x`` rounded up to a multiple of ``multiple``."""
    return -(-x // multiple) * multiple


def padded_head_dim(head_dim: int) -> int:
    """Head dims are padded to the lane width inside the wrapper (64 → 128, 96 → 128)."""
    return round_up(head_dim, LANES)


def forward_vmem_bytes(bq: int, bk: int, head_dim: int, itemsize: int) -> int:
    """Estimated VMEM working set of one forward grid step (double-buffered blocks)."""
    blocks = 2 * (2 * bq * head_dim + 2 * bk * head_dim) * itemsize  # q, o, k, v
    rows = 2 * 2 * 8 * (bq + bk) * 4  # lse and segment-id rows, sublane-padded
    scratch = bq * head_dim * 4 + 3 * bq * LANES * 4  # acc, m, l, q ids as a column
    temps = 4 * bq * bk * 4  # scores, probabilities, mask, exp in float32
    return blocks + rows + scratch + temps


def backward_vmem_bytes(bq: int, bk: int, head_dim: int, itemsize: int) -> int:
    """Estimated VMEM working set of one dq or dk/dv grid step (the larger of the two)."""
    blocks = 2 * (2 * bq * head_dim + 4 * bk * head_dim) * itemsize  # q, do; k, v, dk, dv
    rows = 2 * 4 * 8 * (bq + bk) * 4  # lse, delta, segment-id rows
    scratch = 2 * bk * head_dim * 4 + bq * head_dim * 4 + 3 * max(bq, bk) * LANES * 4
    temps = 6 * bq * bk * 4  # s, p, dp, ds, mask, cast copies
    return blocks + rows + scratch + temps


def _fit(
    bq: int, bk: int, q_cap: int, kv_cap: int, budget: int, estimate: object, h: int, item: int
) -> tuple[int, int]:
    bq, bk = min(bq, q_cap), min(bk, kv_cap)
    while estimate(bq, bk, h, item) > budget and max(bq, bk) > LANES:  # type: ignore[operator]
        if bk >= bq:
            bk = max(LANES, round_up(bk // 2, LANES))
        else:
            bq = max(LANES, round_up(bq // 2, LANES))
    return bq, bk


def choose_block_sizes(
    generation: Generation,
    *,
    q_len: int,
    kv_len: int,
    head_dim: int,
    itemsize: int,
    override: BlockSizes | None = None,
) -> BlockSizes:
    """Block sizes for one call: ``override`` as given, else the generation's, fitted to VMEM.

    Args:
        generation: the table entry (see :func:`generation_for`).
        q_len, kv_len: unpadded sequence lengths (blocks never exceed them rounded up to 128).
        head_dim: the unpadded head dim.
        itemsize: bytes per element of the inputs.
        override: the caller's sizes, used unchanged.
    """
    if override is not None:
        return override
    h = padded_head_dim(head_dim)
    q_cap, kv_cap = round_up(q_len, LANES), round_up(kv_len, LANES)
    pref = generation.preferred
    budget = generation.budget_bytes
    bq, bk = _fit(
        pref.block_q, pref.block_kv, q_cap, kv_cap, budget, forward_vmem_bytes, h, itemsize
    )
    bqb, bkb = _fit(
        pref.block_q_bwd, pref.block_kv_bwd, q_cap, kv_cap, budget, backward_vmem_bytes, h, itemsize
    )
    return BlockSizes(bq, bk, bqb, bkb)


def lcm(a: int, b: int) -> int:
    """Least common multiple (padded lengths must suit both the forward and backward blocks)."""
    return a * b // math.gcd(a, b)
