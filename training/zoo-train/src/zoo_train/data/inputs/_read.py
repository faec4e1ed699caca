"""Documents of input files, streamed in order, with the files skipped and the bytes read."""

from __future__ import annotations

import os
import pathlib
from collections.abc import Callable, Iterator, Sequence

from .._documents import Document, decode_text
from ._files import InputFile, list_inputs
from ._records import read_jsonl, read_table
from ._text import (
    PIECE_CHARS,
    LineBudget,
    is_text,
    open_raw,
    piece_documents,
    pieces,
    read_pieces,
    split_lines,
)

# Files this small are read whole (one read, no separate validation pass).
_SMALL = 4 * PIECE_CHARS


class DocumentStream:
    """The documents of ``sources`` (files, directories, globs), read one at a time.

    Iterating yields :class:`~zoo_train.data.Document` s in a deterministic order; plain text
    longer than :data:`PIECE_CHARS` characters comes as several documents (ids ``name``,
    ``name#2``, …). Binary and non-UTF-8 files found in a directory or by a glob are skipped
    and listed in :attr:`skipped`; :attr:`bytes_read` (of :attr:`total_bytes`, on disk) says
    how far the reading has got. With ``line_split=(fraction, seed)``, text files too few to
    hold out ``fraction`` of them by document (fewer than ``2 / fraction``) are held out by
    their lines instead, at most ``fraction`` of the corpus's characters
    (:func:`~zoo_train.data.inputs._text.split_lines`): one file of three would be a third of
    the corpus.

    Raises (on construction or while iterating):
        ValueError: a missing source, an unsupported or binary file named directly, a
            directory or glob with no readable documents (naming what was skipped), bad JSON.
    """

    def __init__(
        self,
        sources: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
        *,
        text_field: str = "text",
        line_split: tuple[float, int] | None = None,
    ) -> None:
        if isinstance(sources, str | os.PathLike):
            sources = [sources]
        self.sources = [os.fspath(s) for s in sources]
        self.files: list[InputFile] = list_inputs(self.sources)
        self.text_field = text_field
        texts = sum(f.kind == "text" for f in self.files)
        few = line_split is not None and line_split[0] > 0 and texts < 2 / line_split[0]
        self.line_split = line_split if few else None
        self._budget: LineBudget | None = None
        self.sizes = [f.path.stat().st_size for f in self.files]
        self.total_bytes = sum(self.sizes)
        self.bytes_read = 0
        self.skipped: list[pathlib.Path] = []
        # Preference pairs skipped, by reason: [count, where the first one is].
        self.skipped_pairs: dict[str, list] = {}

    def __iter__(self) -> Iterator[Document]:
        self.skipped_pairs = {}
        if self.line_split is not None:  # a fresh budget for each pass over the corpus
            fraction, seed = self.line_split
            self._budget = LineBudget(fraction, self.total_bytes, seed=seed)
        # A source whose files all came through an earlier one has nothing left to find.
        found: dict[str, int] = dict.fromkeys((f.source for f in self.files), 0)
        done = 0
        for file, size in zip(self.files, self.sizes, strict=True):

            def tell(position: int, start: int = done, size: int = size) -> None:
                self.bytes_read = start + min(position, size)

            for doc in self._read(file, tell):
                if doc.text or doc.turns:
                    found[file.source] += 1
                    yield doc
            done += size
            self.bytes_read = done
        for source, count in found.items():
            if count == 0:
                raise self._nothing_in(source)

    def _nothing_in(self, source: str) -> ValueError:
        skipped = [p for p, f in self._skipped_by_source() if f == source]
        what = (
            f"its {len(skipped)} binary or non-UTF-8 file(s) were skipped (e.g. {skipped[0]})"
            if skipped
            else "its files hold no text"
        )
        return ValueError(
            f"The data source {source!r} has no readable documents: {what}; pass text, "
            ".jsonl, Parquet or Arrow files."
        )

    def _skipped_by_source(self) -> list[tuple[pathlib.Path, str]]:
        by_path = {f.path: f.source for f in self.files}
        return [(p, by_path[p]) for p in self.skipped]

    def _skip_pair(self, reason: str, where: str) -> None:
        entry = self.skipped_pairs.setdefault(reason, [0, where])
        entry[0] += 1

    def _read(self, file: InputFile, tell: Callable[[int], None]) -> Iterator[Document]:
        if file.kind == "jsonl":
            return read_jsonl(file, self.text_field, tell, self._skip_pair)
        if file.kind in ("parquet", "arrow"):
            return read_table(file, self.text_field, tell, self._skip_pair)
        return self._read_text(file, tell)

    def _read_text(self, file: InputFile, tell: Callable[[int], None]) -> Iterator[Document]:
        small = not file.compression and file.path.stat().st_size <= _SMALL
        text = decode_text(file.path.read_bytes()) if small else None
        if (small and text is None) or (not small and not is_text(file.path, file.compression)):
            if file.explicit:
                raise ValueError(
                    f"{str(file.path)!r} is a binary or non-UTF-8 file; pass text files (UTF-8)."
                )
            self.skipped.append(file.path)
            return
        if text is not None:
            yield from self._documents(file.name, pieces(text))
            return
        stream, raw = open_raw(file.path, file.compression)
        with raw, stream:
            for doc in self._documents(file.name, read_pieces(stream)):
                yield doc
                tell(raw.tell())

    def _documents(self, name: str, texts: Iterator[str]) -> Iterator[Document]:
        if self._budget is None:
            return piece_documents(name, texts)
        return split_lines(name, texts, self._budget)
