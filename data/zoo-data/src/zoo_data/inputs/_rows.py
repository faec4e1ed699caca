"""Records as they are: the JSON objects of JSON-lines files and the rows of Parquet and Arrow
files (``datasets.save_to_disk`` directories included), every column kept, for readers that
need more than the text (prompts with the columns a reward function checks against)."""

from __future__ import annotations

import dataclasses
import io
import json
import os
import pathlib
from collections.abc import Iterator, Sequence
from typing import Any

from ._compressed import open_raw
from ._files import InputFile, cannot_read, list_inputs

_BATCH_ROWS = 1024


@dataclasses.dataclass(frozen=True)
class Record:
    """One record of an input.

    Attributes:
        where: where it is, for messages (``path:line`` for JSON lines, ``path row N`` for
            tables, counted from 1).
        values: its fields (a JSON object's keys, a row's columns).
    """

    where: str
    values: dict[str, Any]


def _jsonl(file: InputFile) -> Iterator[Record]:
    stream, raw = open_raw(file.path, file.compression)
    with raw, stream:
        lines = io.TextIOWrapper(stream, encoding="utf-8")
        try:
            for number, line in enumerate(lines, start=1):
                if not line.strip():
                    continue
                where = f"{file.path}:{number}"
                values = json_line(line, where)
                if not isinstance(values, dict):
                    raise ValueError(f"{where} is not a JSON object; give one object a line.")
                yield Record(where, values)
        except UnicodeDecodeError as e:
            raise ValueError(f"{str(file.path)!r} is not UTF-8 ({e.reason}).") from e


def json_line(line: str, where: str) -> Any:
    """The JSON value of one line; bad JSON is an error naming ``where``."""
    try:
        return json.loads(line)
    except json.JSONDecodeError as e:
        raise ValueError(f"{where} is not valid JSON ({e.msg}); fix the line.") from e


def arrow_batches(path: pathlib.Path) -> tuple[list[str], Iterator[Any]]:
    """The column names and record batches of an Arrow file, in the file format or the stream
    format (which ``datasets`` writes)."""
    import pyarrow as pa

    source = pa.memory_map(str(path))
    try:
        reader: Any = pa.ipc.open_file(source)
        return reader.schema.names, (reader.get_batch(i) for i in range(reader.num_record_batches))
    except pa.ArrowInvalid:
        source.seek(0)
        stream = pa.ipc.open_stream(source)
        return stream.schema.names, iter(stream)


def _table(file: InputFile) -> Iterator[Record]:
    import pyarrow as pa

    try:
        if file.kind == "parquet":
            import pyarrow.parquet as pq

            batches: Iterator[Any] = pq.ParquetFile(file.path).iter_batches(_BATCH_ROWS)
        else:
            batches = arrow_batches(file.path)[1]
    except (pa.ArrowInvalid, OSError) as e:
        raise ValueError(f"{str(file.path)!r} is not a readable {file.kind} file ({e}).") from e
    row = 0
    for batch in batches:
        for values in batch.to_pylist():
            row += 1
            yield Record(f"{file.path} row {row}", values)


def read_records(
    sources: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
) -> Iterator[Record]:
    """Every record of ``sources`` (files, directories, globs), in order, with all its fields.

    Reads what the token store reads except plain text: JSON lines (plain, ``.gz``, ``.zst``),
    Parquet and Arrow files, and ``datasets.save_to_disk`` directories.

    Raises:
        ValueError: a missing source, a plain-text file (it has no fields), bad JSON, a line
            that is not an object, or a file that cannot be read; the message names it.
    """
    if isinstance(sources, str | os.PathLike):
        sources = [sources]
    for file in list_inputs(sources):
        if file.kind == "text":
            raise ValueError(
                f"{str(file.path)!r} is plain text, which has no fields; give records as JSON "
                "lines (.jsonl, .jsonl.gz, .jsonl.zst), Parquet or Arrow files."
            )
        try:
            yield from _jsonl(file) if file.kind == "jsonl" else _table(file)
        except OSError as e:
            raise cannot_read(file.path, e) from e
