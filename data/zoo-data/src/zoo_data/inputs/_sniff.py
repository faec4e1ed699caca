"""What kind of data a source holds, from its first records: enough to refuse a preference
objective on plain text (or plain fine-tuning on pairs) before a model is loaded, and to say
which chat format conversations will be rendered in."""

from __future__ import annotations

import io
import json
import os
from typing import Any

from .._pairs import is_pair_record
from ._files import InputFile, list_inputs
from ._text import open_raw


def _first_record(file: InputFile) -> Any:
    """The first JSON record of a JSON-lines file (``None``: none, or not JSON)."""
    stream, raw = open_raw(file.path, file.compression)
    with raw, stream:
        lines = io.TextIOWrapper(stream, encoding="utf-8", errors="replace")
        for line in lines:
            if line.strip():
                try:
                    return json.loads(line)
                except json.JSONDecodeError:
                    return None
    return None


def _file_holds_pairs(file: InputFile) -> bool:
    if file.kind == "jsonl":
        return is_pair_record(_first_record(file))
    if file.kind == "parquet":
        import pyarrow.parquet as pq

        names = pq.ParquetFile(file.path).schema_arrow.names
        return "chosen" in names and "rejected" in names
    if file.kind == "arrow":
        import pyarrow as pa

        source = pa.memory_map(str(file.path))
        try:
            names = pa.ipc.open_file(source).schema.names
        except pa.ArrowInvalid:
            source.seek(0)
            names = pa.ipc.open_stream(source).schema.names
        return "chosen" in names and "rejected" in names
    return False


def _file_holds_conversations(file: InputFile) -> bool:
    if file.kind == "jsonl":
        record = _first_record(file)
        if not isinstance(record, dict):
            return False
        return any(isinstance(record.get(k), list) for k in ("messages", "prompt", "chosen"))
    if file.kind == "parquet":
        import pyarrow.parquet as pq

        return "messages" in pq.ParquetFile(file.path).schema_arrow.names
    return False


def raw_holds_conversations(source: str | os.PathLike[str]) -> bool:
    """Whether a file of the raw ``source`` holds conversations (messages, which a chat
    template renders) by its first record or its columns.

    Raises:
        ValueError: a source that does not exist (as :func:`list_inputs`).
    """
    return any(_file_holds_conversations(f) for f in list_inputs([source]))


def raw_holds_pairs(source: str | os.PathLike[str]) -> bool:
    """Whether every file of the raw ``source`` holds preference pairs (by its first record or
    its columns).

    Raises:
        ValueError: a source that does not exist (as :func:`list_inputs`).
    """
    return all(_file_holds_pairs(f) for f in list_inputs([source]))
