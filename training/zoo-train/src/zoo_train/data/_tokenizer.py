"""The tokenizer interface the data pipeline needs, and the default byte-level tokenizer."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable


@runtime_checkable
class Tokenizer(Protocol):
    """What the data pipeline needs from a tokenizer (``zoo_models`` tokenizers satisfy it)."""

    @property
    def vocab_size(self) -> int: ...

    @property
    def eos_id(self) -> int | None: ...

    def encode(self, text: str) -> list[int]: ...

    def decode(self, ids: Sequence[int]) -> str: ...


class _Bytes:
    """UTF-8 bytes as ids ``0..255`` and EOS ``256`` (used when ``zoo_models`` has none)."""

    vocab_size = 257
    eos_id = 256
    bos_id = None

    def encode(self, text: str) -> list[int]:
        return list(text.encode("utf-8"))

    def decode(self, ids: Sequence[int]) -> str:
        return bytes(int(i) for i in ids if 0 <= int(i) < 256).decode("utf-8", errors="replace")

    def __repr__(self) -> str:
        return "ByteTokenizer(eos=True)"


def byte_tokenizer() -> Tokenizer:
    """The default tokenizer: UTF-8 bytes plus an EOS id (``zoo_models.ByteTokenizer`` if present).

    Documents are separated by EOS when packed, so the default has no BOS.
    """
    try:
        from zoo_models import ByteTokenizer  # type: ignore[attr-defined]
    except ImportError:
        return _Bytes()
    return ByteTokenizer(bos=False, eos=True)


def is_byte_level(tokenizer: Tokenizer) -> bool:
    """Whether ``tokenizer``'s ids are a text's UTF-8 bytes (specials only on request)."""
    if isinstance(tokenizer, _Bytes):
        return True
    try:
        from zoo_models import ByteTokenizer  # type: ignore[attr-defined]
    except ImportError:
        return False
    return isinstance(tokenizer, ByteTokenizer)


def encode_fast(tokenizer: Tokenizer, text: str) -> list[int] | bytes:
    """``tokenizer.encode(text)``; the raw UTF-8 bytes when the tokenizer is byte-level (same ids)."""
    return text.encode("utf-8") if is_byte_level(tokenizer) else tokenizer.encode(text)


def leading_bos(tokenizer: Tokenizer) -> int | None:
    """The BOS id to put before every text, or ``None``: the tokenizer's own configuration
    decides (``add_bos``: what its ``tokenizer.json`` post-processor does), the same in training,
    evaluation and generation."""
    if not getattr(tokenizer, "add_bos", False):
        return None
    return getattr(tokenizer, "bos_id", None)
