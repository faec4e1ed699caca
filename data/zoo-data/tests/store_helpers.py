"""Helpers for the token store tests: random documents written in every input format."""

from __future__ import annotations

import gzip
import json
import pathlib

import numpy as np

_ALPHABET = [*list("abcdefghij klmnop\nqrstuvwxyz ,.!?0123"), "é", "ß", "中", "🙂", "  "]


def random_texts(count: int, *, seed: int, max_len: int = 300) -> list[str]:
    """Random non-empty texts of words, punctuation, newlines and non-ASCII characters."""
    rng = np.random.default_rng(seed)
    return [
        "".join(rng.choice(_ALPHABET, int(rng.integers(1, max_len)))).strip() or "x"
        for _ in range(count)
    ]


def write_format(directory: pathlib.Path, fmt: str, texts: list[str]) -> pathlib.Path:
    """``texts`` as one source of format ``fmt``; returns the path to pass to prepare."""
    directory.mkdir(parents=True, exist_ok=True)
    if fmt == "text":
        for i, text in enumerate(texts):
            (directory / f"doc{i:04d}.txt").write_text(text, encoding="utf-8")
        return directory
    lines = "".join(json.dumps({"text": t}) + "\n" for t in texts).encode()
    if fmt == "jsonl":
        (directory / "d.jsonl").write_bytes(lines)
        return directory / "d.jsonl"
    if fmt == "jsonl.gz":
        (directory / "d.jsonl.gz").write_bytes(gzip.compress(lines))
        return directory / "d.jsonl.gz"
    if fmt == "ndjson.zst":
        import zstandard

        (directory / "d.ndjson.zst").write_bytes(zstandard.ZstdCompressor().compress(lines))
        return directory / "d.ndjson.zst"
    import pyarrow as pa

    table = pa.table({"id": list(range(len(texts))), "text": texts})
    if fmt == "parquet":
        import pyarrow.parquet as pq

        pq.write_table(table, directory / "d.parquet", row_group_size=7)
        return directory / "d.parquet"
    if fmt == "arrow":
        with pa.ipc.new_file(directory / "d.arrow", table.schema) as writer:
            for batch in table.to_batches(max_chunksize=5):
                writer.write_batch(batch)
        return directory / "d.arrow"
    if fmt == "datasets":
        import datasets

        datasets.Dataset.from_dict({"text": texts}).save_to_disk(str(directory / "ds"))
        return directory / "ds"
    raise AssertionError(fmt)


FORMATS = ("text", "jsonl", "jsonl.gz", "ndjson.zst", "parquet", "arrow", "datasets")
