"""Plain text files: binary and non-UTF-8 files told apart, long texts cut into pieces.

A text longer than :data:`PIECE_CHARS` characters becomes several documents of at most that
many characters, cut after a line end (else after a space, else anywhere), so that reading
and tokenizing never hold more than a piece of a file however large it is.
"""

from __future__ import annotations

import codecs
import io
import pathlib
from collections.abc import Iterator
from typing import BinaryIO

from .._documents import Document
from ._compressed import open_raw

PIECE_CHARS = 1 << 20
_BLOCK = 1 << 20


def is_text(path: pathlib.Path, compression: str) -> bool:
    """Whether the file is UTF-8 text: no NUL byte in its first 8 KiB, and valid throughout."""
    stream, raw = open_raw(path, compression)
    with raw, stream:
        decoder = codecs.getincrementaldecoder("utf-8")()
        first = True
        while block := stream.read(_BLOCK):
            if first and b"\0" in block[:8192]:
                return False
            first = False
            try:
                decoder.decode(block)
            except UnicodeDecodeError:
                return False
        try:
            decoder.decode(b"", final=True)
        except UnicodeDecodeError:
            return False
    return True


def _cut(text: str, start: int) -> int:
    """Where the piece beginning at ``start`` ends: after the last line end of its second half,
    else after its last space, else at :data:`PIECE_CHARS`."""
    end = start + PIECE_CHARS
    half = start + PIECE_CHARS // 2
    for sep in ("\n", " "):
        at = text.rfind(sep, half, end)
        if at >= 0:
            return at + 1
    return end


def pieces(text: str) -> Iterator[str]:
    """``text`` in pieces of at most :data:`PIECE_CHARS` characters (one piece when it fits)."""
    start = 0
    while len(text) - start > PIECE_CHARS:
        end = _cut(text, start)
        yield text[start:end]
        start = end
    if start < len(text):
        yield text[start:]


def piece_documents(name: str, texts: Iterator[str]) -> Iterator[Document]:
    """One document per piece: ids ``name``, ``name#2``, ``name#3``, …"""
    for k, text in enumerate(texts):
        yield Document(name if k == 0 else f"{name}#{k + 1}", text)


def read_pieces(stream: BinaryIO) -> Iterator[str]:
    """The pieces of a UTF-8 stream, as :func:`pieces` cuts the whole text, read a block at a
    time (never more than two pieces of text in memory)."""
    reader = io.TextIOWrapper(stream, encoding="utf-8", newline="")
    buffer = ""
    while block := reader.read(_BLOCK):
        buffer += block
        while len(buffer) > 2 * PIECE_CHARS:
            end = _cut(buffer, 0)
            yield buffer[:end]
            buffer = buffer[end:]
    yield from pieces(buffer)


class LineBudget:
    """How many characters of a corpus may still be held out: ``fraction`` of its size, shared
    by the files :func:`split_lines` splits, in order."""

    def __init__(self, fraction: float, corpus_chars: int, *, seed: int = 0) -> None:
        self.fraction, self.seed = fraction, seed
        self.left = fraction * corpus_chars


def split_lines(name: str, texts: Iterator[str], budget: LineBudget) -> Iterator[Document]:
    """The text of one file as held-out and training documents, for a corpus of too few files to
    hold out by file: a line goes to the held-out side when the seeded hash of
    ``"name:line number"`` says so (as :func:`~zoo_train.data.split_rows` splits) and the
    corpus's held-out budget still has room for it; each side's lines, in order, form
    documents of at most :data:`PIECE_CHARS` characters (``name:train``, ``name:validation``,
    then ``#2``, …)."""
    from .._split import held_out

    sides: dict[str, list[str]] = {"train": [], "eval": []}
    sizes = dict.fromkeys(sides, 0)
    counts = dict.fromkeys(sides, 0)
    labels = {"train": "train", "eval": "validation"}

    def flush(side: str) -> Document:
        counts[side] += 1
        suffix = "" if counts[side] == 1 else f"#{counts[side]}"
        text = "".join(sides[side])
        sides[side], sizes[side] = [], 0
        return Document(f"{name}:{labels[side]}{suffix}", text, split=side)

    number, carry = 0, ""

    def side_of(line: str) -> str:
        nonlocal number
        number += 1
        chosen = held_out(f"{name}:{number}", budget.fraction, seed=budget.seed)
        if chosen and len(line) <= budget.left:
            budget.left -= len(line)
            return "eval"
        return "train"

    for block in texts:
        lines = (carry + block).splitlines(keepends=True)
        carry = lines.pop() if lines and not lines[-1].endswith(("\n", "\r")) else ""
        for line in lines:
            side = side_of(line)
            sides[side].append(line)
            sizes[side] += len(line)
            if sizes[side] >= PIECE_CHARS:
                yield flush(side)
    if carry:
        sides[side_of(carry)].append(carry)
    for side in sides:
        if sides[side]:
            yield flush(side)
