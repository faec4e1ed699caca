"""``verify_store``: every block of every shard file checked against its hash, on every core.

The work is cut into pieces of :data:`PIECE_BLOCKS` blocks, each memory-mapped and hashed in
place by one thread of a pool: xxHash releases the GIL while it hashes, so threads scale without
processes (12.5 GB/s on one thread, 29 GB/s on two, hashing bytes already in memory). Mapping
instead of reading saves a copy: 6-10 GB/s against 2.6-3.3 GB/s with ``preadv`` into a buffer,
a 1 GB store in the page cache on two busy cores. A store without block hashes (made by an older
zoo) has each file's sha256 checked instead, one file per task.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import mmap
import os
import pathlib
import sys
import time
from collections.abc import Callable
from typing import Any

import xxhash

from ._blocks import block_info, block_range
from ._manifest import read_manifest
from ._verify import file_problem, sha256_file

PIECE_BLOCKS = 16  # blocks read and hashed per task: 16 MiB, few tasks, a bar that moves


@dataclasses.dataclass(frozen=True)
class Damage:
    """A damaged part of a store's file.

    Attributes:
        name: the file, relative to the store (``train/00000.tokens``).
        start, stop: its damaged bytes ``[start, stop)`` (the whole file when it is missing, of
            another size, or checked by its sha256 alone).
        reason: ``"hash"``, ``"checksum"``, ``"size"`` or ``"missing"``.
    """

    name: str
    start: int
    stop: int
    reason: str

    def describe(self) -> str:
        """``train/00000.tokens bytes 0-1,048,575`` (or what is wrong with the whole file)."""
        if self.reason in ("size", "missing"):
            return f"{self.name} ({'missing' if self.reason == 'missing' else 'wrong size'})"
        return f"{self.name} bytes {self.start:,}-{self.stop - 1:,}"


@dataclasses.dataclass(frozen=True)
class VerifyReport:
    """What :func:`verify_store` found.

    Attributes:
        damaged: the damaged ranges, by file then offset (contiguous blocks merged).
        files, bytes: shard files and bytes checked.
        blocks: blocks hashed (0 for a store without block hashes).
        hashed: whether the store carries block hashes (else its sha256s were checked).
        seconds: the time the check took.
    """

    damaged: list[Damage]
    files: int
    bytes: int
    blocks: int
    hashed: bool
    seconds: float


def _merged(found: list[Damage]) -> list[Damage]:
    out: list[Damage] = []
    for d in sorted(found, key=lambda d: (d.name, d.start)):
        last = out[-1] if out else None
        if last and last.name == d.name and last.stop == d.start and last.reason == d.reason:
            out[-1] = dataclasses.replace(last, stop=d.stop)
        else:
            out.append(d)
    return out


def _piece_task(
    path: pathlib.Path, record: dict[str, Any], first: int, last: int, block_bytes: int
) -> tuple[list[Damage], int]:
    """Check blocks ``first … last - 1`` of one file: the damaged ones, and the bytes read."""
    size = record["bytes"]
    start, _ = block_range(first, size, block_bytes)
    _, stop = block_range(last - 1, size, block_bytes)
    bad = []
    with open(path, "rb") as f:
        if os.fstat(f.fileno()).st_size != size:  # changed since it was listed: not mapped
            return [Damage(record["name"], 0, size, "size")], 0
        # start is a multiple of the block size, so of the mapping granularity
        with (
            mmap.mmap(f.fileno(), stop - start, offset=start, access=mmap.ACCESS_READ) as mapped,
            memoryview(mapped) as view,
        ):
            for index in range(first, last):
                a, b = block_range(index, size, block_bytes)
                got = xxhash.xxh3_64_intdigest(view[a - start : b - start])
                if got != int(record["blocks"][index], 16):
                    bad.append(Damage(record["name"], a, b, "hash"))
    return bad, stop - start


def _sha_task(path: pathlib.Path, record: dict[str, Any]) -> tuple[list[Damage], int]:
    if sha256_file(path) == record["sha256"]:
        return [], record["bytes"]
    return [Damage(record["name"], 0, record["bytes"], "checksum")], record["bytes"]


def verify_store(
    path: str | os.PathLike[str], *, workers: int | None = None, progress: bool = True
) -> VerifyReport:
    """Check every block of every shard file of the store at ``path`` against the hashes its
    manifest records (a store without block hashes: every file's sha256), on ``workers``
    threads (default: every core). Missing files and files of another size are damaged too.

    Args:
        path: the store directory.
        workers: threads reading and hashing (default ``os.cpu_count()``).
        progress: show a progress bar (bytes checked, GB/s) on stderr, when it is a terminal.

    Returns:
        A :class:`VerifyReport`; the store is intact when its ``damaged`` is empty.

    Raises:
        ValueError: ``path`` is not a token store.
    """
    from tqdm.auto import tqdm

    root = pathlib.Path(path)
    manifest = read_manifest(root)
    blocks = block_info(manifest)
    workers = (os.cpu_count() or 1) if workers is None else workers
    if workers < 1:
        raise ValueError(f"The number of workers must be at least 1, got {workers}.")
    records = [f for s in manifest["shards"] for f in s["files"]]
    damaged: list[Damage] = []
    tasks: list[tuple[Callable[..., tuple[list[Damage], int]], tuple]] = []
    total = count = 0
    for record in records:
        problem = file_problem(root, record, checksum=False)
        if problem is not None:
            missing = not (root / record["name"]).is_file()
            reason = "missing" if missing else "size"
            damaged.append(Damage(record["name"], 0, record["bytes"], reason))
            continue
        total += record["bytes"]
        digests = record.get("blocks")
        if blocks is None or digests is None:
            tasks.append((_sha_task, (root / record["name"], record)))
            continue
        count += len(digests)
        for first in range(0, len(digests), PIECE_BLOCKS):
            last = min(first + PIECE_BLOCKS, len(digests))
            args = (root / record["name"], record, first, last, blocks["bytes"])
            tasks.append((_piece_task, args))
    bar = tqdm(
        total=total,
        unit="B",
        unit_scale=True,
        desc="verify",
        disable=not (progress and sys.stderr.isatty()),
        dynamic_ncols=True,
        delay=1.0,  # only for a check long enough to watch
    )
    started = time.perf_counter()
    with bar, concurrent.futures.ThreadPoolExecutor(workers) as pool:
        for bad, done in pool.map(lambda task: task[0](*task[1]), tasks):
            damaged += bad
            bar.update(done)
    return VerifyReport(
        damaged=_merged(damaged),
        files=len(records),
        bytes=total,
        blocks=count,
        hashed=blocks is not None,
        seconds=time.perf_counter() - started,
    )
