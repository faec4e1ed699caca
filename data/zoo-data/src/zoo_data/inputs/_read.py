"""Documents of input files, streamed in order, with the files skipped and the bytes read."""

from __future__ import annotations

import dataclasses
import logging
import os
import pathlib
from collections.abc import Callable, Iterator, Sequence

from .._documents import Document, decode_text
from .._pairs import skipped_sentence
from ._compressed import open_raw
from ._files import InputFile, cannot_read, list_inputs
from ._records import read_jsonl, read_table
from ._text import PIECE_CHARS, is_text, piece_documents, pieces, read_pieces

logger = logging.getLogger("zoo_data")

# Files this small are read whole (one read, no separate validation pass).
_SMALL = 4 * PIECE_CHARS


class DocumentStream:
    """The documents of ``sources`` (files, directories, globs), read one at a time.

    Iterating yields :class:`~zoo_data.Document` s in a deterministic order; plain text
    longer than :data:`PIECE_CHARS` characters comes as several documents (ids ``name``,
    ``name#2``, …). Binary and non-UTF-8 files found in a directory or by a glob are skipped
    and listed in :attr:`skipped`, JSON lines that are not UTF-8 likewise (counted by file in
    :attr:`skipped_lines`); each pass logs one warning for the files and one per file of
    lines. :attr:`bytes_read` (of :attr:`total_bytes`, on disk) says how far the reading has
    got. With ``line_split=(fraction, seed)``, text files too few to
    hold out ``fraction`` of them by the hash of each (fewer than ``2 / fraction``) are held
    out whole where that share of the corpus's bytes allows, in the order of their hash
    (:func:`~zoo_data._split.whole_held_out`): a document is never cut, so one file of
    three is held out by none; :attr:`split_note` says what was done. Nothing inside the
    directories ``exclude`` names is read (the store a prepare writes).

    Raises (on construction or while iterating):
        ValueError: a missing source, an unsupported or binary file named directly, a
            directory or glob with no readable documents (naming what was skipped), bad JSON,
            a file the system will not read (an I/O error, no permission, damaged or
            truncated compressed data).
    """

    def __init__(
        self,
        sources: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
        *,
        text_field: str = "text",
        line_split: tuple[float, int] | None = None,
        exclude: Sequence[str | os.PathLike[str]] = (),
    ) -> None:
        if isinstance(sources, str | os.PathLike):
            sources = [sources]
        self.sources = [os.fspath(s) for s in sources]
        self.files: list[InputFile] = list_inputs(self.sources, exclude=exclude)
        self.text_field = text_field
        texts = sum(f.kind == "text" for f in self.files)
        # Only text files are documents that a hash split could leave too few of.
        few = line_split is not None and line_split[0] > 0 and 0 < texts < 2 / line_split[0]
        self.sizes = [f.path.stat().st_size for f in self.files]
        self.total_bytes = sum(self.sizes)
        #: Text files held out whole (a corpus of too few to hold out by hash), else ``None``.
        self.held_files: set[pathlib.Path] | None = None
        #: What was held out of such a corpus, for a person (``None``: the hash rule).
        self.split_note: str | None = None
        if few and line_split is not None:
            self._hold_out_whole(*line_split, texts)
        self.bytes_read = 0
        self.skipped: list[pathlib.Path] = []
        self.skipped_lines: dict[pathlib.Path, tuple[int, int]] = {}
        # Preference pairs skipped, by reason: [count, where the first one is]; and by source.
        self.skipped_pairs: dict[str, list] = {}
        self._pairs_skipped_in: dict[str, dict[str, list]] = {}

    def _hold_out_whole(self, fraction: float, seed: int, texts: int) -> None:
        from .._split import whole_held_out

        files = [(f, s) for f, s in zip(self.files, self.sizes, strict=True) if f.kind == "text"]
        budget = fraction * self.total_bytes
        picked = whole_held_out([(f.name, s) for f, s in files], budget, seed=seed)
        chosen = [files[i] for i in picked]
        self.held_files = {f.path for f, _ in chosen}
        share = sum(s for _, s in chosen) / max(self.total_bytes, 1)
        few = f"{texts} text file(s) are too few to hold out {fraction:.0%} of the data by hash"
        if not chosen:
            self.split_note = (
                f"{few}; none was held out, as each is more than that share and a document is "
                "never cut (pass --eval-data, or more files, to evaluate)"
            )
            return
        names = [f.name for f, _ in chosen]
        shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
        self.split_note = f"{few}; held out {len(names)} whole: {shown} ({share:.1%} of the bytes)"

    def __iter__(self) -> Iterator[Document]:
        self.skipped, self.skipped_lines, self.skipped_pairs = [], {}, {}
        self._pairs_skipped_in = {}
        # A source whose files all came through an earlier one has nothing left to find.
        found: dict[str, int] = dict.fromkeys((f.source for f in self.files), 0)
        done = 0
        for file, size in zip(self.files, self.sizes, strict=True):

            def tell(position: int, start: int = done, size: int = size) -> None:
                self.bytes_read = start + min(position, size)

            try:
                for doc in self._read(file, tell):
                    if doc.text or doc.turns:
                        found[file.source] += 1
                        yield doc
            except (OSError, EOFError) as e:  # EIO, EACCES, damaged or truncated .gz/.zst
                raise cannot_read(file.path, e) from e
            if file.path in self.skipped_lines:
                count, first = self.skipped_lines[file.path]
                logger.warning(
                    "skipped %d line(s) of %s that are not valid UTF-8 (the first: line %d); "
                    "re-encode them as UTF-8 to train on them",
                    count, file.path, first,
                )  # fmt: skip
            done += size
            self.bytes_read = done
        for source, count in found.items():
            if count == 0:
                raise self._nothing_in(source)  # which says what was skipped
        if self.split_note is not None:  # said once the data is known to be usable
            logger.warning("%s", self.split_note)
        if self.skipped:
            logger.warning(
                "skipped %d binary or non-UTF-8 file(s) in the data (e.g. %s)",
                len(self.skipped), self.skipped[0],
            )  # fmt: skip

    def _nothing_in(self, source: str) -> ValueError:
        by_path = {f.path: f.source for f in self.files}
        skipped = [p for p in self.skipped if by_path[p] == source]
        lines = [(p, first) for p, (_, first) in self.skipped_lines.items() if by_path[p] == source]
        pairs = self._pairs_skipped_in.get(source)
        if pairs:  # every pair carried no preference: the same sentence as a partial skip's
            said = "; ".join(skipped_sentence(r, n, first) for r, (n, first) in pairs.items())
            return ValueError(
                f"The data source {source!r} has no preference pair to train on: {said}; pass "
                "pairs whose chosen and rejected responses differ and are not empty."
            )
        if skipped:
            what = (
                f"its {len(skipped)} binary or non-UTF-8 file(s) were skipped (e.g. {skipped[0]})"
            )
        elif lines:
            what = f"its lines are not valid UTF-8 (e.g. {lines[0][0]}:{lines[0][1]})"
        else:
            what = "its files hold no text"
        return ValueError(
            f"The data source {source!r} has no readable documents: {what}; pass text, "
            ".jsonl, Parquet or Arrow files."
        )

    def _skip_pair(self, reason: str, where: str, source: str) -> None:
        for counts in (self.skipped_pairs, self._pairs_skipped_in.setdefault(source, {})):
            entry = counts.setdefault(reason, [0, where])
            entry[0] += 1

    def _read(self, file: InputFile, tell: Callable[[int], None]) -> Iterator[Document]:
        def skip_pair(reason: str, where: str) -> None:
            self._skip_pair(reason, where, file.source)

        if file.kind == "jsonl":

            def not_utf8(line: int) -> None:
                count, first = self.skipped_lines.get(file.path, (0, line))
                self.skipped_lines[file.path] = (count + 1, first)

            return read_jsonl(file, self.text_field, tell, not_utf8, skip_pair)
        if file.kind in ("parquet", "arrow"):
            return read_table(file, self.text_field, tell, skip_pair)
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
            yield from self._documents(file, pieces(text))
            return
        stream, raw = open_raw(file.path, file.compression)
        with raw, stream:
            for doc in self._documents(file, read_pieces(stream)):
                yield doc
                tell(raw.tell())

    def _documents(self, file: InputFile, texts: Iterator[str]) -> Iterator[Document]:
        if self.held_files is None:
            return piece_documents(file.name, texts)
        side = "eval" if file.path in self.held_files else "train"
        return (dataclasses.replace(d, split=side) for d in piece_documents(file.name, texts))
