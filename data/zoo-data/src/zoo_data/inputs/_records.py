"""Records: JSON lines (plain, ``.gz``, ``.zst``) and the rows of Parquet and Arrow files, read a
line or a record batch at a time, as documents (plain text, chat or prompt/completion)."""

from __future__ import annotations

import io
import re
from collections.abc import Callable, Iterator
from typing import Any

from .._chat import parse_example
from .._documents import Document
from .._pairs import is_pair_record, pair_documents
from ._compressed import open_raw
from ._files import InputFile
from ._rows import arrow_batches, json_line
from ._text import piece_documents, pieces

_BATCH_ROWS = 1024
_INVALID = re.compile("[\udc80-\udcff]")


def record_documents(
    record: Any,
    name: str,
    where: str,
    text_field: str,
    *,
    required: bool,
    skip: Callable[[str, str], None] | None = None,
) -> Iterator[Document]:
    """The documents of one record: a preference pair, a chat or prompt/completion example, or
    its text field (cut into pieces when long). A record without the text field is an error
    when ``required`` (JSON lines), else skipped (a null cell of a table); a pair without a
    preference is skipped, told to ``skip(reason, where)``."""
    if is_pair_record(record):
        yield from pair_documents(record, name, where, skip)
        return
    turns = parse_example(record, where) if isinstance(record, dict) else None
    if turns is not None:
        yield Document(name, "\n".join(c for _, c in turns), turns)
        return
    text = record.get(text_field) if isinstance(record, dict) else None
    if not isinstance(text, str):
        if not required:
            return
        raise ValueError(
            f"{where} has no string field {text_field!r}; give each JSON line a {text_field!r} "
            "field (or `messages`, or `prompt` and `completion`), or name the field that holds "
            "the text (`--text-field NAME`)."
        )
    yield from piece_documents(name, pieces(text))


def read_jsonl(
    file: InputFile,
    text_field: str,
    tell: Callable[[int], None],
    not_utf8: Callable[[int], None],
    skip: Callable[[str, str], None] | None = None,
) -> Iterator[Document]:
    """The documents of a JSON-lines file; ``tell(bytes on disk read so far)`` after each line;
    ``skip(reason, where)`` for each pair skipped. A line that is not valid UTF-8 is skipped
    and ``not_utf8(its number)`` told, as a text file that is not is skipped (replacing its
    bytes would train on mojibake)."""
    stream, raw = open_raw(file.path, file.compression)
    with raw, stream:
        # surrogateescape: an invalid byte becomes a lone surrogate, which valid UTF-8 never
        # decodes to (JSON's "\udc80" escapes are still text here), so the line can be told.
        lines = io.TextIOWrapper(stream, encoding="utf-8", errors="surrogateescape")
        for line_no, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            if not line.isascii() and _INVALID.search(line):  # isascii: a flag, no scan
                not_utf8(line_no)
                continue
            where = f"{file.path}:{line_no}"
            record = json_line(line, where)
            yield from record_documents(
                record, f"{file.name}:{line_no}", where, text_field, required=True, skip=skip
            )
            tell(raw.tell())


def _columns(names: list[str], file: InputFile, text_field: str) -> list[str]:
    if "messages" in names:
        return ["messages"]
    if "chosen" in names or "rejected" in names:  # a preference pair (checked per record)
        pair = ("prompt", "chosen", "rejected", "tools", "documents")
        return [n for n in pair if n in names]
    if "prompt" in names and "completion" in names:
        return ["prompt", "completion"]
    if text_field in names:
        return [text_field]
    raise ValueError(
        f"{str(file.path)!r} has no column {text_field!r} (its columns: {', '.join(names)}); "
        "name the column that holds the text (`--text-field NAME`)."
    )


def _batches(file: InputFile, text_field: str) -> tuple[Iterator[Any], int]:
    """Record batches of the columns that hold documents, and the number of rows (-1: unknown)."""

    if file.kind == "parquet":
        import pyarrow.parquet as pq

        table = pq.ParquetFile(file.path)
        columns = _columns(table.schema_arrow.names, file, text_field)
        rows = table.metadata.num_rows
        return table.iter_batches(batch_size=_BATCH_ROWS, columns=columns), rows
    names, batches = arrow_batches(file.path)
    columns = _columns(names, file, text_field)
    # The stream format does not say how many rows it holds: progress moves per file.
    return (b.select(columns) for b in batches), -1


def read_table(
    file: InputFile,
    text_field: str,
    tell: Callable[[int], None],
    skip: Callable[[str, str], None] | None = None,
) -> Iterator[Document]:
    """The documents of a Parquet or Arrow file, a record batch at a time."""
    import pyarrow as pa

    try:
        batches, rows = _batches(file, text_field)
    except (pa.ArrowInvalid, OSError) as e:
        raise ValueError(f"{str(file.path)!r} is not a readable {file.kind} file ({e}).") from e
    size = file.path.stat().st_size
    row = 0
    for batch in batches:
        for record in batch.to_pylist():
            row += 1
            yield from record_documents(
                record,
                f"{file.name}:{row}",
                f"{file.path} row {row}",
                text_field,
                required=False,
                skip=skip,
            )
        if rows > 0:
            tell(size * row // rows)
