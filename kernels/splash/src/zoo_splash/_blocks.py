"""Block-size policy: the tiles splash cuts the query and key sequences into.

Splash needs every block to divide its sequence and (for the in-kernel mask and segment ids)
to be a multiple of the 128 TPU lanes, so a sequence length must be a multiple of 128. Of the
blocks that divide it, the largest up to 512 is taken: MaxText's default for splash on every
generation, fewer grid steps than splash's own default of 128, and it fits the smallest VMEM
(v4, v5e: 16 MiB scoped) with head dims up to 256 in float32, forward and backward (compiled
for v4, v5e, v5p and v6e). The same blocks serve the forward, dQ and dK/dV kernels.
"""

from __future__ import annotations

from jax.experimental.pallas.ops.tpu.splash_attention import BlockSizes

#: Every block length is a multiple of this (the TPU lane width).
LANES = 128
#: Candidate block lengths, largest first.
BLOCK_CHOICES: tuple[int, ...] = (512, 256, 128)


def block_for(length: int, max_block: int = BLOCK_CHOICES[0]) -> int | None:
    """The largest candidate block no longer than ``max_block`` that divides ``length``.

    ``None`` when ``length`` is not a positive multiple of :data:`LANES`.
    """
    for block in BLOCK_CHOICES:
        if block <= max_block and length > 0 and length % block == 0:
            return block
    return None


def length_reason(q_len: int, kv_len: int) -> str | None:
    """Why splash cannot tile these lengths, or ``None`` when it can."""
    bad = [f"{name} {n}" for name, n in (("q_len", q_len), ("kv_len", kv_len)) if not block_for(n)]
    if not bad:
        return None
    return (
        f"{' and '.join(bad)} not a multiple of {LANES} (splash tiles each sequence in blocks "
        f"of {', '.join(map(str, BLOCK_CHOICES))} that divide it); pad the sequence"
    )


def choose_block_sizes(q_len: int, kv_len: int, max_block: int = BLOCK_CHOICES[0]) -> BlockSizes:
    """Splash's ``BlockSizes`` for a ``q_len`` x ``kv_len`` call, forward and backward.

    Args:
        q_len: query length T, a multiple of 128.
        kv_len: key/value length S, a multiple of 128.
        max_block: the longest block to use (128, 256 or 512).

    Raises:
        ValueError: a length splash cannot tile (see :func:`length_reason`).
    """
    reason = length_reason(q_len, kv_len)
    if reason is not None:
        raise ValueError(f"splash: {reason}.")
    bq, bkv = block_for(q_len, max_block), block_for(kv_len, max_block)
    if bq is None or bkv is None:
        raise ValueError(f"splash: max_block must be one of {BLOCK_CHOICES}, got {max_block}.")
    return BlockSizes(
        block_q=bq,
        block_kv=bkv,
        block_kv_compute=bkv,
        block_q_dkv=bq,
        block_kv_dkv=bkv,
        block_kv_dkv_compute=bkv,
        block_q_dq=bq,
        block_kv_dq=bkv,
    )
