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


def stdlib_files(*, max_bytes: int = 4_000_000, seed: int = 0) -> list[pathlib.Path]:
    """A deterministic subset of the standard library's ``*.py`` files (UTF-8, not empty),
    about ``max_bytes`` of text.

    Files are ranked by a seeded hash of their path relative to the stdlib root (so the subset
    samples the whole library, not one package) and taken until ``max_bytes`` is reached. The
    same Python version and ``seed`` give the same files.

    Raises:
        ValueError: ``max_bytes`` is not positive, or the stdlib holds no ``*.py`` files.
    """
    return [path for path, _ in _stdlib(max_bytes=max_bytes, seed=seed)]


def stdlib_corpus(*, max_bytes: int = 4_000_000, seed: int = 0) -> list[Document]:
    """The documents of :func:`stdlib_files`; document ids are the paths relative to the
    standard library's root."""
    root = _root()
    return [
        Document(path.relative_to(root).as_posix(), text)
        for path, text in _stdlib(max_bytes=max_bytes, seed=seed)
    ]


def _root() -> pathlib.Path:
    return pathlib.Path(sysconfig.get_paths()["stdlib"])


def _stdlib(*, max_bytes: int, seed: int) -> list[tuple[pathlib.Path, str]]:
    if max_bytes <= 0:
        raise ValueError(f"`max_bytes` must be positive, got {max_bytes}.")
    root = _root()
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

    out: list[tuple[pathlib.Path, str]] = []
    total = 0
    for path in sorted(files, key=rank):
        try:  # a few test files are deliberately not UTF-8: they are not text to train on
            text = path.read_bytes().decode("utf-8")
        except UnicodeDecodeError:
            continue
        if not text.strip():
            continue
        out.append((path, text))
        total += len(text.encode("utf-8"))
        if total >= max_bytes:
            break
    return out
