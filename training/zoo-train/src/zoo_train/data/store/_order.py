"""A seeded permutation of ``range(n)`` computed index by index (a Feistel network with cycle
walking), so that the row an epoch serves at any position is known without a table or state.

A balanced Feistel network over ``2 * h`` bits (``4**h >= n``) is a bijection of
``[0, 4**h)`` for any round function; indices that land at or beyond ``n`` are mapped again
until they fall inside ("cycle walking"), which keeps it a bijection of ``[0, n)``.
"""

from __future__ import annotations

import functools
import hashlib

import numpy as np

_ROUNDS = 6
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


def _mix(x: np.ndarray) -> np.ndarray:
    """SplitMix64's finaliser: a fast, well-spread 64-bit mixing function."""
    x = (x ^ (x >> np.uint64(30))) * _M1
    x = (x ^ (x >> np.uint64(27))) * _M2
    return x ^ (x >> np.uint64(31))


@functools.lru_cache(maxsize=64)
def _keys(seed: int, stream: int, epoch: int) -> tuple[np.uint64, ...]:
    digest = hashlib.blake2b(f"{seed}:{stream}:{epoch}".encode(), digest_size=8 * _ROUNDS).digest()
    return tuple(
        np.uint64(int.from_bytes(digest[8 * i : 8 * i + 8], "little")) for i in range(_ROUNDS)
    )


def _feistel(x: np.ndarray, half: int, keys: tuple[np.uint64, ...]) -> np.ndarray:
    mask = np.uint64((1 << half) - 1)
    left, right = x >> np.uint64(half), x & mask
    for key in keys:
        left, right = right, left ^ (_mix(right ^ key) & mask)
    return (left << np.uint64(half)) | right


def permute(index: np.ndarray, n: int, *, seed: int, stream: int = 0, epoch: int = 0) -> np.ndarray:
    """Where a seeded permutation of ``range(n)`` sends each of ``index`` (int ``[K]``, each in
    ``[0, n)``). Different ``(seed, stream, epoch)`` give independent permutations.

    Returns:
        int64 ``[K]``.
    """
    if n < 1:
        raise ValueError(f"A permutation needs at least one element, got n={n}.")
    half = max(1, (int(n - 1).bit_length() + 1) // 2)
    keys = _keys(seed, stream, epoch)
    x = _feistel(np.asarray(index, np.uint64), half, keys)
    outside = x >= np.uint64(n)
    while outside.any():
        x[outside] = _feistel(x[outside], half, keys)
        outside = x >= np.uint64(n)
    return x.astype(np.int64)
