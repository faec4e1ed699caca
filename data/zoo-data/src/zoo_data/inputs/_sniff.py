"""What kind of data a source holds, from its first records: enough to refuse a preference
objective on plain text (or plain fine-tuning on pairs) before a model is loaded."""

from __future__ import annotations

import io
import json
import os

from .._pairs import is_pair_record
from ._files import InputFile, list_inputs
from ._text import open_raw


def _file_holds_pairs(file: InputFile) -> bool:
    if file.kind == "jsonl":
        stream, raw = open_raw(file.path, file.compression)
        with raw, stream:
            lines = io.TextIOWrapper(stream, encoding="utf-8", errors="replace")
            for line in lines:
                if line.strip():
                    try:
                        return is_pair_record(json.loads(line))
                    except json.JSONDecodeError:
                        return False
        return False
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


def raw_holds_pairs(source: str | os.PathLike[str]) -> bool:
    """Whether every file of the raw ``source`` holds preference pairs (by its first record or
    its columns).

    Raises:
        ValueError: a source that does not exist (as :func:`list_inputs`).
    """
    return all(_file_holds_pairs(f) for f in list_inputs([source]))
