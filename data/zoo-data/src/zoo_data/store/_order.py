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

_ROUNDS = 4  # Luby-Rackoff: four rounds of a good mixing function
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


def _mix(x: np.ndarray) -> np.ndarray:
    """SplitMix64's finaliser, in place: a fast, well-spread 64-bit mixing function."""
    x ^= x >> np.uint64(30)
    x *= _M1
    x ^= x >> np.uint64(27)
    x *= _M2
    x ^= x >> np.uint64(31)
    return x


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
        mixed = _mix(right ^ key)
        mixed &= mask
        mixed ^= left
        left, right = right, mixed
    left <<= np.uint64(half)
    left |= right
    return left


_MASK64 = (1 << 64) - 1


def _feistel_ints(x: list[int], half: int, keys: tuple[np.uint64, ...]) -> list[int]:
    """:func:`_feistel` in Python integers (the same values): faster for a batch's few rows."""
    mask, m1, m2 = (1 << half) - 1, int(_M1), int(_M2)
    ints = [int(k) for k in keys]
    out = []
    for value in x:
        left, right = value >> half, value & mask
        for key in ints:
            t = right ^ key
            t = ((t ^ (t >> 30)) * m1) & _MASK64
            t = ((t ^ (t >> 27)) * m2) & _MASK64
            left, right = right, left ^ ((t ^ (t >> 31)) & mask)
        out.append((left << half) | right)
    return out


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
    if len(index) <= 64:
        small = _feistel_ints([int(i) for i in index], half, keys)
        for i, value in enumerate(small):
            while value >= n:
                value = _feistel_ints([value], half, keys)[0]
            small[i] = value
        return np.array(small, np.int64)
    x = _feistel(np.asarray(index, np.uint64), half, keys)
    limit = np.uint64(n)
    outside = x >= limit
    while outside.any():
        x = np.where(outside, _feistel(x, half, keys), x)
        outside = x >= limit
    return x.astype(np.int64)
