"""The data of a run: documents (or the stdlib corpus) into packed loaders."""

from __future__ import annotations

import dataclasses
import glob
import os
import sys
from typing import Any

from .._usage import UsageError
from ..data import (
    Document,
    PackedLoader,
    load_documents,
    split_documents,
    split_rows,
    stdlib_corpus,
)
from ..settings import RunSettings


def check_data_paths(paths: list[str]) -> None:
    """Refuse empty or missing paths before anything heavy is imported."""
    for path in paths:
        if not path.strip():
            raise UsageError("--data got an empty path; pass a file, directory or glob with text.")
        if any(c in path for c in "*?["):
            if not glob.glob(path, recursive=True):
                raise UsageError(f"The data glob {path!r} matches no files; pass an existing path.")
        elif not os.path.exists(path):
            raise UsageError(
                f"The data path {path!r} does not exist; pass a file, directory or glob with text."
            )


def load_corpus(
    paths: list[str], *, max_bytes: int, text_field: str = "text"
) -> tuple[list[Document], str]:
    """The documents of ``paths`` (the stdlib corpus when empty) and a short description;
    ``text_field`` names the field of ``.jsonl`` lines that holds the text."""
    if not paths:
        docs = stdlib_corpus(max_bytes=max_bytes)
        return docs, f"the Python standard library ({len(docs)} files)"
    docs = load_documents(paths, text_field=text_field, on_skipped=_say_skipped)
    if sum(len(d.text) for d in docs) == 0:  # pragma: no cover - load_documents drops empties
        raise UsageError(f"The data in {paths} is empty; pass files with text.")
    noun = "document" if len(docs) == 1 else "documents"
    return docs, f"{', '.join(paths)} ({len(docs)} {noun})"


def _say_skipped(count: int, example: str) -> None:
    noun = "file" if count == 1 else "files"
    print(
        f"zoo: warning: skipped {count} binary or non-UTF-8 {noun} in the data (e.g. {example}).",
        file=sys.stderr,
    )


def _split(
    docs: list[Document],
    *,
    seed: int,
    val_fraction: float,
    eval_docs: list[Document] | None = None,
) -> tuple[list[Document], list[Document], str]:
    """The training and held-out documents, and what is held out, in words."""
    if not 0.0 <= val_fraction < 1.0:
        raise UsageError(f"`val_fraction` must be in [0, 1), got {val_fraction}.")
    if eval_docs is not None:
        return docs, eval_docs, ""
    if len(docs) == 1 and not docs[0].turns:
        train, val = split_rows(docs[0], val_fraction=val_fraction, seed=seed)
        return train, val, f"{val_fraction:.0%} of its lines held out for evaluation"
    train, val = split_documents(docs, val_fraction=val_fraction, seed=seed)
    return (
        train,
        val,
        f"{len(val):,} of {len(docs):,} documents held out for evaluation "
        f"(val_fraction {val_fraction:g})",
    )


def _loaders(
    train_docs: list[Document],
    val_docs: list[Document],
    tokenizer: Any,
    *,
    seq_len: int,
    seed: int,
    val_fraction: float,
) -> tuple[PackedLoader, PackedLoader | None]:
    try:
        train = PackedLoader.from_documents(train_docs, tokenizer, seq_len=seq_len, seed=seed)
    except ValueError as e:
        raise UsageError(str(e)) from None
    val = None
    if val_docs:
        try:
            val = PackedLoader.from_documents(
                val_docs, tokenizer, seq_len=seq_len, shuffle=False, eval_only=True
            )
        except ValueError:
            val = None
    if val is None and val_fraction > 0:
        print("zoo: too little held-out text for evaluation; training without it.", file=sys.stderr)
    return train, val


def make_loaders(
    docs: list[Document],
    tokenizer: Any,
    *,
    seq_len: int,
    seed: int,
    val_fraction: float,
    eval_docs: list[Document] | None = None,
) -> tuple[PackedLoader, PackedLoader | None]:
    """A shuffled training loader and an evaluation loader of the held-out documents.

    With ``eval_docs`` (``--eval-data``) every document trains and those evaluate; else the
    documents are split by :func:`split_documents`, or a single document by its lines
    (:func:`split_rows`). The evaluation loader is ``None`` (with a note on stderr) when the
    split leaves it too little text for one row.
    """
    train_docs, val_docs, _ = _split(
        docs, seed=seed, val_fraction=val_fraction, eval_docs=eval_docs
    )
    return _loaders(
        train_docs, val_docs, tokenizer, seq_len=seq_len, seed=seed, val_fraction=val_fraction
    )


@dataclasses.dataclass
class Data:
    """A run's training loader, its held-out loader (or ``None``) and a description for the
    start line."""

    train: PackedLoader
    val: PackedLoader | None
    described: str


def build_data(s: RunSettings, tokenizer: Any) -> Data:
    """The data of the settings (``data``, ``eval_data``, the split), tokenized for ``tokenizer``."""
    docs, described = load_corpus(s.data, max_bytes=s.max_bytes, text_field=s.text_field)
    eval_docs = None
    if s.eval_data:
        check_data_paths(s.eval_data)
        eval_docs, _ = load_corpus(s.eval_data, max_bytes=s.max_bytes, text_field=s.text_field)
        described += f", evaluated on {', '.join(s.eval_data)}"
    train_docs, val_docs, held_out = _split(
        docs, seed=s.seed, val_fraction=s.val_fraction, eval_docs=eval_docs
    )
    train, val = _loaders(
        train_docs,
        val_docs,
        tokenizer,
        seq_len=s.seq_len,
        seed=s.seed,
        val_fraction=s.val_fraction,
    )
    if held_out and val is not None:
        described += f", {held_out}"
    return Data(train, val, described)
