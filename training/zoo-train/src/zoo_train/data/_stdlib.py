"""The default corpus: the Python standard library's own source files."""

from __future__ import annotations

import hashlib
import pathlib
import sysconfig

from ._documents import Document

# Third-party and generated code is not "the standard library"; tests are kept (they are code too).
_EXCLUDED_PARTS = frozenset(
    {"site-packages", "dist-packages", "__pycache__", "idlelib", "turtledemo"}
)


def stdlib_corpus(*, max_bytes: int = 4_000_000, seed: int = 0) -> list[Document]:
    """A deterministic subset of the standard library's ``*.py`` files, about ``max_bytes`` of text.

    Files are ranked by a seeded hash of their path relative to the stdlib root (so the subset
    samples the whole library, not one package) and taken until ``max_bytes`` is reached. The same
    Python version and ``seed`` give the same corpus; document ids are the relative paths.

    Raises:
        ValueError: ``max_bytes`` is not positive, or the stdlib holds no ``*.py`` files.
    """
    if max_bytes <= 0:
        raise ValueError(f"`max_bytes` must be positive, got {max_bytes}.")
    root = pathlib.Path(sysconfig.get_paths()["stdlib"])
    files = [
        p
        for p in root.rglob("*.py")
        if p.is_file() and not _EXCLUDED_PARTS.intersection(p.relative_to(root).parts)
    ]
    if not files:
        raise ValueError(f"No *.py files found under the standard library at {root}.")

    def rank(p: pathlib.Path) -> str:
        # Salted apart from split_documents' hash: with the same seed and ids, the files picked
        # (lowest hashes) would otherwise all fall into the validation split.
        return hashlib.sha256(
            f"stdlib:{seed}:{p.relative_to(root).as_posix()}".encode()
        ).hexdigest()

    docs: list[Document] = []
    total = 0
    for path in sorted(files, key=rank):
        text = path.read_bytes().decode("utf-8", errors="replace")
        if not text.strip():
            continue
        docs.append(Document(path.relative_to(root).as_posix(), text))
        total += len(text.encode("utf-8"))
        if total >= max_bytes:
            break
    return docs
