"""Requests in batches of one padded shape each: sorted by length and padded to a bucket, so a
task compiles a handful of programs, not one per request.

Pure Python: what is batched and how wide, never the model.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

#: The shortest bucket: shorter rows are padded to it (one program for every short request).
MIN_BUCKET = 16


def bucket_length(length: int, cap: int) -> int:
    """The padded length of a row of ``length`` tokens: the next power of two at least
    :data:`MIN_BUCKET`, but never beyond ``cap`` (the model's positions)."""
    if length > cap:
        raise ValueError(f"A row of {length} tokens is longer than the {cap} allowed.")
    bucket = MIN_BUCKET
    while bucket < length:
        bucket *= 2
    return min(bucket, cap)


def padded_rows(rows: int, devices: int) -> int:
    """``rows`` rounded up to a multiple of ``devices``, so every device holds as many rows."""
    return -(-max(rows, 1) // devices) * devices


@dataclasses.dataclass(frozen=True)
class Batch:
    """Requests computed together.

    Attributes:
        indices: positions of its requests in the list given to :func:`plan_batches`.
        length: the padded length of its rows (a bucket).
    """

    indices: tuple[int, ...]
    length: int


def plan_batches(lengths: Sequence[int], batch_size: int, cap: int) -> list[Batch]:
    """Batches of at most ``batch_size`` requests of similar length, longest first.

    Requests are sorted by length (descending, ties by position) and cut into runs that share a
    bucket; a run longer than ``batch_size`` is cut into batches of ``batch_size``. A request's
    result never depends on its neighbours, so the order changes nothing but speed.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size}.")
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    batches: list[Batch] = []
    current: list[int] = []
    bucket = 0
    for i in order:
        b = bucket_length(lengths[i], cap)
        if current and (b != bucket or len(current) == batch_size):
            batches.append(Batch(tuple(current), bucket))
            current = []
        if not current:
            bucket = b
        current.append(i)
    if current:
        batches.append(Batch(tuple(current), bucket))
    return batches
