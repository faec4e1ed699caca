"""The tiling of a call: ``(tm, tk, tn)``, rows, contracting and output columns per grid step.

Megablox multiplies a ``[tm, tk]`` tile of ``lhs`` by a ``[tk, tn]`` tile of one group's
``rhs``. Its backward pass reuses the tiling with the roles of ``K`` and ``N`` swapped, so both
``tk`` and ``tn`` must suit the lane dimension (multiples of 128), and ``tm`` the sublanes (8
rows of float32, 16 of bfloat16). ``M`` must be a multiple of ``tm`` (the call pads it); ``K``
and ``N`` need not be (the kernel masks the last tile).

The largest tiles are those that compiled forward and backward for v5e and v6e (libtpu
compile-only devices, ``[2048, 4096] x [8, 4096, 14336]``) at Mosaic's default scoped VMEM:
512 x 1024 x 1024 in bfloat16; in float32 that ran out of VMEM in the backward pass, and
512 x 512 x 512 is used. None of this was timed on a TPU.
"""

from __future__ import annotations

import dataclasses

LANE = 128
#: Rows of a sublane tile, by dtype.
SUBLANE = {"float32": 8, "bfloat16": 16}
#: The largest ``(tm, tk, tn)`` by dtype (see the module docstring).
MAX_TILES: dict[str, tuple[int, int, int]] = {
    "bfloat16": (512, 1024, 1024),
    "float32": (512, 512, 512),
}
#: The smallest ``tm`` the policy picks.
MIN_TM = 128


@dataclasses.dataclass(frozen=True)
class Tiling:
    """``tm`` rows of ``lhs``, ``tk`` of the contracting dimension, ``tn`` output columns."""

    tm: int
    tk: int
    tn: int

    def as_tuple(self) -> tuple[int, int, int]:
        return (self.tm, self.tk, self.tn)


def round_up(x: int, multiple: int) -> int:
    """``x`` rounded up to a multiple of ``multiple``."""
    return -(-x // multiple) * multiple


def choose_tiling(m: int, k: int, n: int, groups: int, dtype: str) -> Tiling:
    """The tiling for ``lhs [m, k]``, ``rhs [groups, k, n]`` in ``dtype``.

    ``tk`` and ``tn``: the largest tile, or the dimension rounded up to the lane width when it
    is smaller (a larger tile only wastes VMEM). ``tm``: the largest power of two from 128 up to
    the largest tile whose waste stays within an eighth of the rows: a group that starts
    inside a tile makes the kernel visit that tile again, up to ``groups`` extra tiles.
    """
    tm_max, tk_max, tn_max = MAX_TILES[dtype]
    tm = MIN_TM
    while tm < tm_max and 2 * tm * groups * 8 <= m:
        tm *= 2
    return Tiling(tm, min(tk_max, round_up(k, LANE)), min(tn_max, round_up(n, LANE)))


def tiling_problem(tiling: Tiling, dtype: str) -> str | None:
    """Why a fixed tiling does not suit TPU blocks (one sentence), or ``None``."""
    sub = SUBLANE.get(dtype, 8)
    if tiling.tm % sub or tiling.tk % LANE or tiling.tn % LANE or min(tiling.as_tuple()) <= 0:
        return (
            f"tiling {tiling.as_tuple()} does not suit TPU blocks in {dtype}: tm must be a "
            f"multiple of {sub} and tk, tn of {LANE} (the backward pass swaps tk and tn)"
        )
    return None
