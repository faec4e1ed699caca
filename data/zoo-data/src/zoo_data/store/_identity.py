"""Which tokenizer made a store: loading it, its fingerprint, and saving it beside the tokens."""

from __future__ import annotations

import hashlib
import json
import os
import pathlib
from typing import Any

from .._tokenizer import Tokenizer, byte_tokenizer, is_byte_level, leading_bos
from .._tokenizers import ByteTokenizer
from .._tokenizers import load_tokenizer as read_tokenizer

TOKENIZER_DIR = "tokenizer"


def load_tokenizer(spec: str | os.PathLike[str] | Tokenizer | None) -> tuple[Tokenizer, str]:
    """``(tokenizer, description)`` of ``spec``: ``None`` for the byte tokenizer, a
    ``tokenizer.json`` or a Hugging Face directory, or a tokenizer object.

    Raises:
        ValueError: a path that does not exist or holds no ``tokenizer.json``.
    """
    if spec is None:
        return byte_tokenizer(), "the byte tokenizer"
    if not isinstance(spec, str | os.PathLike):
        return spec, repr(spec)
    path = pathlib.Path(spec)
    file = path if path.is_file() else path / "tokenizer.json"
    if not file.is_file():
        raise ValueError(
            f"No tokenizer.json at {os.fspath(spec)!r}; pass a tokenizer.json file or a Hugging "
            "Face directory that holds one."
        )
    return read_tokenizer(path), f"the tokenizer at {os.fspath(spec)}"


def tokenizer_identity(tokenizer: Tokenizer, description: str) -> dict[str, Any]:
    """What a store records of its tokenizer; ``fingerprint`` changes with anything that changes
    the tokens (vocabulary, merges, normalisation, BOS/EOS and whether BOS leads, chat template)."""
    inner = getattr(tokenizer, "tokenizer", None)
    if is_byte_level(tokenizer):
        kind = "bytes"
    else:
        kind = "tokenizers" if inner is not None and hasattr(inner, "to_str") else "custom"
    facts: dict[str, Any] = {
        "kind": kind,
        "vocab_size": int(tokenizer.vocab_size),
        "bos_id": getattr(tokenizer, "bos_id", None),
        "eos_id": tokenizer.eos_id,
        "leading_bos": leading_bos(tokenizer) is not None,
    }
    content: dict[str, Any] = dict(facts)
    if kind == "tokenizers":
        content["json"] = hashlib.sha256(inner.to_str().encode()).hexdigest()
        content["chat_template"] = getattr(tokenizer, "chat_template", None)
    elif kind == "custom":  # what it does to a probe text is all that can be known of it
        content["probe"] = list(tokenizer.encode("Hello, world! 0123 \u00e9\u4e2d\n\tx  y"))
        content["repr"] = repr(tokenizer)
    digest = hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()
    return {**facts, "fingerprint": digest, "description": description}


def save_tokenizer(tokenizer: Tokenizer, directory: pathlib.Path) -> None:
    """Write the tokenizer's files into ``directory`` (nothing for the byte tokenizer)."""
    if hasattr(tokenizer, "save") and getattr(tokenizer, "tokenizer", None) is not None:
        tokenizer.save(directory)  # type: ignore[attr-defined]


def stored_tokenizer(identity: dict[str, Any], directory: pathlib.Path) -> Tokenizer:
    """The tokenizer a store was made with, from its files (or its byte tokenizer's ids).

    Raises:
        ValueError: a store made with a tokenizer object that left no files behind.
    """
    if identity["kind"] == "bytes":
        return ByteTokenizer(bos=identity["bos_id"] is not None, eos=identity["eos_id"] is not None)
    if not (directory / "tokenizer.json").is_file():
        raise ValueError(
            f"The store was made with {identity['description']}, whose files it does not hold; "
            "pass that tokenizer yourself."
        )
    return read_tokenizer(directory)
