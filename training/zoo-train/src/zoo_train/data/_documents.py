"""Reading documents from text files, directories, globs and JSON lines."""

from __future__ import annotations

import dataclasses
import glob
import json
import os
import pathlib
from collections.abc import Iterable, Sequence

_JSONL_SUFFIXES = (".jsonl", ".ndjson")


@dataclasses.dataclass(frozen=True)
class Document:
    """One training document.

    Attributes:
        id: a stable name (``path`` or ``path:line``), used for the train/validation split.
        text: the document's text.
    """

    id: str
    text: str


def _expand(source: str | os.PathLike[str]) -> list[pathlib.Path]:
    text = os.fspath(source)
    if any(c in text for c in "*?["):
        paths = [pathlib.Path(p) for p in sorted(glob.glob(text, recursive=True))]
        files = [p for p in paths if p.is_file()]
        if not files:
            raise ValueError(
                f"The glob {text!r} matches no files; pass an existing path or pattern."
            )
        return files
    path = pathlib.Path(text)
    if path.is_dir():
        files = sorted(
            p
            for p in path.rglob("*")
            if p.is_file() and not any(part.startswith(".") for part in p.relative_to(path).parts)
        )
        if not files:
            raise ValueError(f"The directory {text!r} holds no files; pass one with text files.")
        return files
    if path.is_file():
        return [path]
    raise ValueError(f"The data source {text!r} does not exist; pass a file, directory or glob.")


def _read_jsonl(path: pathlib.Path, text_field: str) -> Iterable[Document]:
    with path.open(encoding="utf-8", errors="replace") as f:
        for line_no, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(
                    f"{path}:{line_no} is not valid JSON ({e.msg}); fix the line."
                ) from e
            if not isinstance(record, dict) or not isinstance(record.get(text_field), str):
                raise ValueError(
                    f"{path}:{line_no} has no string field {text_field!r}; "
                    f"give each JSON line a {text_field!r} field or change `text_field`."
                )
            yield Document(f"{path}:{line_no}", record[text_field])


def load_documents(
    sources: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    *,
    text_field: str = "text",
) -> list[Document]:
    """Read documents from files, directories (recursive, hidden files skipped) and globs.

    A ``.jsonl``/``.ndjson`` file gives one document per line (its ``text_field``); any other file
    is one document, decoded as UTF-8 (undecodable bytes become U+FFFD). Empty documents are
    dropped. The order is deterministic: sources in the given order, files sorted by path.

    Raises:
        ValueError: a source that does not exist or matches nothing, or a bad JSON line.
    """
    if isinstance(sources, str | os.PathLike):
        sources = [sources]
    docs: list[Document] = []
    for source in sources:
        for path in _expand(source):
            if path.suffix in _JSONL_SUFFIXES:
                docs.extend(d for d in _read_jsonl(path, text_field) if d.text)
            else:
                text = path.read_bytes().decode("utf-8", errors="replace")
                if text:
                    docs.append(Document(str(path), text))
    if not docs:
        raise ValueError(f"No non-empty documents found in {list(map(os.fspath, sources))!r}.")
    return docs
