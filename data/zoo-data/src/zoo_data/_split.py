"""The deterministic train/validation split, by document."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from ._documents import Document


def _unit(seed: int, doc_id: str) -> float:
    digest = hashlib.sha256(f"{seed}:{doc_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2.0**64


def held_out(doc_id: str, fraction: float, *, seed: int = 0) -> bool:
    """Whether the document ``doc_id`` belongs to the held-out side of a ``fraction`` split:
    the same seeded hash of its id as :func:`split_documents` (less its at-least-one rule)."""
    return _unit(seed, doc_id) < fraction


def whole_held_out(sizes: Sequence[tuple[str, int]], budget: float, *, seed: int = 0) -> list[int]:
    """The documents held out from a corpus of too few to hold out by the hash alone: given
    ``(id, size)`` of each, taken in the order of their seeded hash (the one :func:`held_out`
    compares with the fraction), each that still fits in what is left of ``budget`` (the
    fraction of the corpus's size); their indices in ``sizes``, in that order. A document is
    never cut, so when every one is larger than the budget, none is held out."""
    chosen = []
    for _, index in sorted((_unit(seed, doc_id), i) for i, (doc_id, _) in enumerate(sizes)):
        size = sizes[index][1]
        if 0 < size <= budget:
            chosen.append(index)
            budget -= size
    return chosen


def split_documents(
    docs: Sequence[Document], *, val_fraction: float = 0.05, seed: int = 0
) -> tuple[list[Document], list[Document]]:
    """Split ``docs`` into ``(train, validation)`` by a seeded hash of each document's id.

    A document's side depends only on its id and ``seed``, so adding documents never moves
    existing ones across the split. With ``val_fraction > 0`` and at least two documents, each side
    gets at least one document.

    Raises:
        ValueError: ``val_fraction`` outside ``[0, 1)``.
    """
    if not 0.0 <= val_fraction < 1.0:
        raise ValueError(f"`val_fraction` must be in [0, 1), got {val_fraction}.")
    scored = [(_unit(seed, d.id), i) for i, d in enumerate(docs)]
    val_idx = {i for u, i in scored if u < val_fraction}
    if val_fraction > 0 and len(docs) >= 2:
        order = sorted(scored)
        if not val_idx:
            val_idx = {order[0][1]}
        elif len(val_idx) == len(docs):
            val_idx.discard(order[-1][1])
    train = [d for i, d in enumerate(docs) if i not in val_idx]
    val = [d for i, d in enumerate(docs) if i in val_idx]
    return train, val


def split_rows(
    doc: Document, *, val_fraction: float = 0.05, seed: int = 0
) -> tuple[list[Document], list[Document]]:
    """Split one document by its lines (rows), for a corpus of a single file: each line goes to
    the validation side by the same seeded hash as :func:`split_documents` (of
    ``"id:line number"``), and each side's lines, in order, form one document.

    Raises:
        ValueError: ``val_fraction`` outside ``[0, 1)``.
    """
    lines = doc.text.splitlines(keepends=True)
    rows = [Document(f"{doc.id}:{i + 1}", line) for i, line in enumerate(lines)]
    train, val = split_documents(rows, val_fraction=val_fraction, seed=seed)

    def joined(part: list[Document], side: str) -> list[Document]:
        return [Document(f"{doc.id}:{side}", "".join(r.text for r in part))] if part else []

    return joined(train, "train"), joined(val, "validation")
