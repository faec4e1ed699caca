"""Block sizes per TPU generation: one table keyed by device kind, and a VMEM budget check.

The table holds what each generation is good at (preferred block sizes, the VMEM limit to ask
Mosaic for, the chip's peak for the benchmark). ``choose_block_sizes`` starts from the preferred
sizes, caps them at the (padded) sequence lengths and halves them until every kernel's
estimated working set fits the generation's VMEM budget. Callers override any of it by passing
their own :class:`BlockSizes`.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import math
from collections.abc import Callable

from ._chip import chip_vmem_bytes

LANES = 128  # every block edge is a multiple of the lane width
MiB = 1024 * 1024
_log = logging.getLogger("zoo_flash_tpu")


@dataclasses.dataclass(frozen=True)
class BlockSizes:
    """Tile edges (in tokens) of the three kernels; each a positive multiple of 128.

    The ``*_compute`` sizes split a key block the kernel has loaded (its DMA block) into
    sub-blocks it computes one after the other, so the float32 score and probability tiles are
    ``block_q x block_kv_compute`` however large the DMA block is. ``None`` computes the whole
    block at once.

    Attributes:
        block_q: query rows per forward block.
        block_kv: key rows per forward block (loaded from HBM at once).
        block_q_bwd: query rows per block of the dq and dk/dv kernels.
        block_kv_bwd: key rows per block of the dq and dk/dv kernels.
        block_kv_compute: key rows per forward compute sub-block; divides ``block_kv``.
        block_kv_bwd_compute: key rows per dq compute sub-block; divides ``block_kv_bwd``.
    """

    block_q: int = 512
    block_kv: int = 512
    block_q_bwd: int = 512
    block_kv_bwd: int = 512
    block_kv_compute: int | None = None
    block_kv_bwd_compute: int | None = None

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if value is None and field.name.endswith("_compute"):
                continue
            if not isinstance(value, int) or value <= 0 or value % LANES:
                raise ValueError(
                    f"BlockSizes.{field.name} must be a positive multiple of {LANES}, got {value!r}."
                )
        for sub, whole in (
            ("block_kv_compute", "block_kv"),
            ("block_kv_bwd_compute", "block_kv_bwd"),
        ):
            if getattr(self, sub) is not None and getattr(self, whole) % getattr(self, sub):
                raise ValueError(
                    f"BlockSizes.{sub}={getattr(self, sub)} must divide {whole}="
                    f"{getattr(self, whole)}."
                )

    @property
    def kv_compute(self) -> int:
        """Key rows per forward compute sub-block (the whole key block when unset)."""
        return self.block_kv_compute or self.block_kv

    @property
    def kv_bwd_compute(self) -> int:
        """Key rows per dq compute sub-block (the whole key block when unset)."""
        return self.block_kv_bwd_compute or self.block_kv_bwd


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


def _row(name: str, kind: str, vmem: int, limit: int, peak: float, pref: BlockSizes) -> Generation:
    # VMEM from JAX's own chip table where it has the chip; the tuned limit never exceeds it.
    vmem = chip_vmem_bytes(kind) or vmem
    return Generation(name, vmem, min(limit, vmem), peak, pref)


# Key blocks of 1024 are loaded at once but computed 512 keys at a time (v4: 256, for its
# 16 MiB of VMEM): the float32 tiles stay at most 512 wide, still whole MXU passes.
_V4 = _row("v4", "TPU v4", 16 * MiB, 14 * MiB, 275e12, BlockSizes(512, 512, 256, 512, 256, 256))
_V5E = _row(
    "v5e", "TPU v5 lite", 128 * MiB, 64 * MiB, 197e12, BlockSizes(512, 1024, 512, 512, 512, 512)
)
_V5P = _row("v5p", "TPU v5", 64 * MiB, 48 * MiB, 459e12, BlockSizes(512, 1024, 512, 512, 512, 512))
_V6E = _row(
    "v6e", "TPU v6 lite", 128 * MiB, 96 * MiB, 918e12, BlockSizes(1024, 1024, 512, 1024, 512, 512)
)

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

#: Unknown TPU kinds get v4's conservative budget and blocks (see :func:`unknown_generation`);
#: interpret mode gets small blocks so CPU runs stay fast and multi-block paths are exercised
#: at small lengths. The interpret row is never used for a Mosaic compile.
FALLBACK = dataclasses.replace(_V4, name="unknown")
INTERPRET = Generation("interpret", 128 * MiB, 64 * MiB, 0.0, BlockSizes(128, 128, 128, 128))


def generation_for(device_kind: str | None, *, interpret: bool = False) -> Generation:
    """The table entry for a device kind.

    ``None`` means no TPU is named: the interpret-mode row when running in interpret mode,
    else (a Mosaic compile for an unnamed target) the conservative row.
    """
    if device_kind is None:
        return INTERPRET if interpret else unknown_generation(None)
    row = GENERATIONS.get(device_kind)
    return row if row is not None else unknown_generation(device_kind)


@functools.cache
def unknown_generation(device_kind: str | None) -> Generation:
    """The conservative row for a TPU the table does not know, logged once per device kind.

    v4's blocks and VMEM limit (the smallest of the table), lowered further if JAX says the
    chip has less VMEM than that. With no device kind at all (a check asked about a TPU in
    general, as a kernel listing does on another machine) there is no chip to name: the row is
    logged at debug level only.
    """
    vmem = chip_vmem_bytes(device_kind) if device_kind else None
    row = FALLBACK
    if vmem is not None:
        row = dataclasses.replace(
            FALLBACK,
            vmem_bytes=vmem,
            vmem_limit_bytes=min(FALLBACK.vmem_limit_bytes, vmem * 7 // 8),
        )
    # The logger's name says which package speaks; the message does not repeat it.
    _log.log(
        logging.DEBUG if device_kind is None else logging.WARNING,
        "no block-size row for device kind %r; using the conservative row "
        "(VMEM limit %d MiB%s, blocks %s). Pass block_sizes= to tune it.",
        device_kind,
        row.vmem_limit_bytes // MiB,
        "" if vmem is None else f", chip VMEM {vmem // MiB} MiB from JAX",
        row.preferred,
    )
    return row


def round_up(x: int, multiple: int) -> int:
    """``x`` rounded up to a multiple of ``multiple``."""
    return -(-x // multiple) * multiple


def padded_head_dim(head_dim: int) -> int:
    """Head dims are padded to the lane width inside the wrapper (64 → 128, 96 → 128)."""
    return round_up(head_dim, LANES)


#: Most query heads of one GQA group the forward and dQ kernels take per grid step: their
#: bodies unroll over them, so this bounds code size (and the group's VMEM share).
MAX_HEADS_PER_STEP = 8


def heads_per_step(group: int, limit: int = MAX_HEADS_PER_STEP) -> int:
    """Query heads per forward/dQ grid step: the largest divisor of ``group`` up to ``limit``.

    Each key/value block is then loaded once per that many query heads (once per group when
    the group has at most ``limit`` heads) instead of once per query head.
    """
    return max(d for d in range(1, min(group, limit) + 1) if group % d == 0)


def forward_vmem_bytes(
    bq: int, bk: int, head_dim: int, itemsize: int, heads: int = 1, bk_compute: int | None = None
) -> int:
    """Estimated VMEM working set of one forward grid step (double-buffered blocks).

    ``heads`` query heads share each key/value block; their scores are computed one head at a
    time, and ``bk_compute`` keys at a time (default the whole block), so the float32
    temporaries grow with neither.
    """
    bkc = bk_compute or bk
    blocks = 2 * (2 * heads * bq * head_dim + 2 * bk * head_dim) * itemsize  # q, o; k, v
    rows = 2 * 2 * 8 * (heads * bq + bk) * 4  # lse and segment-id rows, sublane-padded
    scratch = heads * (bq * head_dim * 4 + 2 * bq * LANES * 4) + bq * LANES * 4  # acc, m, l; ids
    scaled_q = heads * bq * head_dim * itemsize
    temps = 5 * bq * bkc * 4  # scores, probabilities, mask, exp in float32
    return blocks + rows + scratch + scaled_q + temps


def backward_vmem_bytes(
    bq: int, bk: int, head_dim: int, itemsize: int, heads: int = 1, bk_compute: int | None = None
) -> int:
    """Estimated VMEM working set of one dq or dk/dv grid step (the larger of the two).

    The dq kernel computes ``bk_compute`` keys at a time; dk/dv computes whole blocks.
    """
    bkc = bk_compute or bk
    dq_blocks = 2 * (3 * heads * bq * head_dim + 2 * bk * head_dim) * itemsize  # q, do, dq; k, v
    dkdv_blocks = 2 * (2 * bq * head_dim + 4 * bk * head_dim) * itemsize  # q, do; k, v, dk, dv
    rows = 2 * 4 * 8 * (heads * bq + bk) * 4  # lse, delta, segment-id rows
    dq_scratch = heads * (bq * head_dim * (4 + itemsize) + 2 * bq * LANES * 4) + bq * LANES * 4
    dkdv_scratch = 2 * bk * head_dim * 4 + bk * head_dim * itemsize + bk * LANES * 4
    temps = 7 * 4  # s, p, dp, ds, mask, cast copies, per score
    return (
        max(
            dq_blocks + dq_scratch + temps * bq * bkc,
            dkdv_blocks + dkdv_scratch + temps * bq * bk,
        )
        + rows
    )


def compute_block(preferred: int | None, block: int) -> int | None:
    """The compute sub-block for a key block: ``preferred`` where it splits the block evenly,
    else ``None`` (the whole block at once)."""
    if preferred is None or preferred >= block or block % preferred:
        return None
    return preferred


def _fit(
    bq: int,
    bk: int,
    q_cap: int,
    kv_cap: int,
    budget: int,
    estimate: Callable[[int, int], int],
) -> tuple[int, int]:
    bq, bk = min(bq, q_cap), min(bk, kv_cap)
    while estimate(bq, bk) > budget and max(bq, bk) > LANES:
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
    heads: int = 1,
    override: BlockSizes | None = None,
) -> BlockSizes:
    """Block sizes for one call: ``override`` as given, else the generation's, fitted to VMEM.

    Args:
        generation: the table entry (see :func:`generation_for`).
        q_len, kv_len: unpadded sequence lengths (blocks never exceed them rounded up to 128).
        head_dim: the unpadded head dim.
        itemsize: bytes per element of the inputs.
        heads: query heads per forward/dQ grid step (:func:`heads_per_step`).
        override: the caller's sizes, used unchanged.
    """
    if override is not None:
        return override
    h = padded_head_dim(head_dim)
    q_cap, kv_cap = round_up(q_len, LANES), round_up(kv_len, LANES)
    pref = generation.preferred
    budget = generation.budget_bytes
    bq, bk = _fit(
        pref.block_q,
        pref.block_kv,
        q_cap,
        kv_cap,
        budget,
        lambda bq, bk: forward_vmem_bytes(
            bq, bk, h, itemsize, heads, compute_block(pref.block_kv_compute, bk)
        ),
    )
    bqb, bkb = _fit(
        pref.block_q_bwd,
        pref.block_kv_bwd,
        q_cap,
        kv_cap,
        budget,
        lambda bq, bk: backward_vmem_bytes(
            bq, bk, h, itemsize, heads, compute_block(pref.block_kv_bwd_compute, bk)
        ),
    )
    return BlockSizes(
        bq,
        bk,
        bqb,
        bkb,
        compute_block(pref.block_kv_compute, bk),
        compute_block(pref.block_kv_bwd_compute, bkb),
    )


def smallest_blocks_vmem_bytes(head_dim: int, itemsize: int, heads: int) -> int:
    """The larger of the forward and backward working sets at the smallest blocks (128 x 128):
    below this no block choice goes. Above a generation's ``vmem_limit_bytes`` the kernel
    cannot serve the call."""
    h = padded_head_dim(head_dim)
    return max(
        forward_vmem_bytes(LANES, LANES, h, itemsize, heads),
        backward_vmem_bytes(LANES, LANES, h, itemsize, heads),
    )


def lcm(a: int, b: int) -> int:
    """Least common multiple (padded lengths must suit both the forward and backward blocks)."""
    return a * b // math.gcd(a, b)
