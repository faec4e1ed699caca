"""Reading documents from text files, directories, globs and JSON lines."""

from __future__ import annotations

import dataclasses
import glob
import json
import logging
import os
import pathlib
from collections.abc import Callable, Iterable, Sequence

from ._chat import parse_example

_JSONL_SUFFIXES = (".jsonl", ".ndjson")
logger = logging.getLogger("zoo_data")


@dataclasses.dataclass(frozen=True)
class Document:
    """One training document.

    Attributes:
        id: a stable name (the path inside the directory given, or ``name:line`` for a JSON
            line), used for the train/validation split.
        text: the document's text (for an instruction or chat example, its contents joined).
        turns: an instruction or chat example's ``(role, content)`` pairs (``("prompt", …),
            ("completion", …)`` for a prompt/completion pair; see :mod:`._chat`); empty for
            plain text.
        split: ``"train"`` or ``"eval"`` when the document's side of the held-out split is
            already chosen (the files of a corpus too small to split by hash); empty: by the
            hash of its id.
        rejected: a preference pair's rejected example (its prompt and rejected response),
            ``turns`` then being the chosen one (see :mod:`._pairs`); empty otherwise.
    """

    id: str
    text: str
    turns: tuple[tuple[str, str], ...] = ()
    split: str = ""
    rejected: tuple[tuple[str, str], ...] = ()


def _expand(source: str | os.PathLike[str]) -> list[tuple[pathlib.Path, str, bool]]:
    """``(file, document id, named explicitly)`` for each file of ``source``.

    Ids do not depend on how a path is spelled: a file inside a directory is named by its
    path relative to that directory, a file named directly by its name, a glob's matches by
    their absolute paths.
    """
    text = os.fspath(source)
    if any(c in text for c in "*?["):
        paths = [pathlib.Path(p) for p in sorted(glob.glob(text, recursive=True))]
        files = [p for p in paths if p.is_file()]
        if not files:
            raise ValueError(
                f"The glob {text!r} matches no files; pass an existing path or pattern."
            )
        return [(p, p.resolve().as_posix(), False) for p in files]
    path = pathlib.Path(text)
    if path.is_dir():
        files = sorted(
            p
            for p in path.rglob("*")
            if p.is_file() and not any(part.startswith(".") for part in p.relative_to(path).parts)
        )
        if not files:
            raise ValueError(f"The directory {text!r} holds no files; pass one with text files.")
        return [(p, p.relative_to(path).as_posix(), False) for p in files]
    if path.is_file():
        return [(path, path.name, True)]
    raise ValueError(f"The data source {text!r} does not exist; pass a file, directory or glob.")


def _text(path: pathlib.Path) -> str | None:
    """The file's text, or ``None`` for a binary (a NUL byte) or non-UTF-8 file."""
    return decode_text(path.read_bytes())


def decode_text(data: bytes) -> str | None:
    """UTF-8 text, or ``None`` for binary data (a NUL byte in the first 8 KiB) or non-UTF-8."""
    if b"\0" in data[:8192]:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _read_jsonl(path: pathlib.Path, name: str, text_field: str) -> Iterable[Document]:
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
            where = f"{path}:{line_no}"
            turns = parse_example(record, where) if isinstance(record, dict) else None
            if turns is not None:
                yield Document(f"{name}:{line_no}", "\n".join(c for _, c in turns), turns)
                continue
            if not isinstance(record, dict) or not isinstance(record.get(text_field), str):
                raise ValueError(
                    f"{path}:{line_no} has no string field {text_field!r}; give each JSON "
                    f"line a {text_field!r} field (or `messages`, or `prompt` and "
                    "`completion`), or name the field that holds the text (`--set "
                    "text_field=NAME`; `zoo eval --text-field NAME`)."
                )
            yield Document(f"{name}:{line_no}", record[text_field])


def load_documents(
    sources: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    *,
    text_field: str = "text",
    on_skipped: Callable[[int, str], None] | None = None,
) -> list[Document]:
    """Read documents from files, directories (recursive, hidden files skipped) and globs.

    A ``.jsonl``/``.ndjson`` file gives one document per line: a chat example (``messages``), a
    ``prompt``/``completion`` pair, or plain text (its ``text_field``); any other file
    is one document of UTF-8 text. Binary and non-UTF-8 files found in a directory or by a glob
    are skipped, and ``on_skipped(count, an example path)`` is told (default: a logged
    warning); a file named explicitly must be text. Empty documents are dropped. The order is
    deterministic: sources in the given order, files sorted by path. Document ids (which decide
    the train/validation split) do not depend on how the paths are spelled.

    Raises:
        ValueError: a source that does not exist or matches nothing, a binary or non-UTF-8
            file named explicitly, or a bad JSON line.
    """
    if isinstance(sources, str | os.PathLike):
        sources = [sources]
    docs: list[Document] = []
    skipped: list[pathlib.Path] = []
    for source in sources:
        for path, name, explicit in _expand(source):
            if path.suffix in _JSONL_SUFFIXES:
                docs.extend(d for d in _read_jsonl(path, name, text_field) if d.text)
                continue
            text = _text(path)
            if text is None and explicit:
                raise ValueError(
                    f"{str(path)!r} is a binary or non-UTF-8 file; pass text files (UTF-8)."
                )
            if text is None:
                skipped.append(path)
            elif text:
                docs.append(Document(name, text))
    if skipped:
        (on_skipped or _log_skipped)(len(skipped), str(skipped[0]))
    if not docs:
        raise ValueError(f"No non-empty documents found in {list(map(os.fspath, sources))!r}.")
    return docs


def _log_skipped(count: int, example: str) -> None:
    logger.warning("skipped %d binary or non-UTF-8 file(s) in the data (e.g. %s)", count, example)
