"""The tokenizer interface the data pipeline needs, and the default byte-level tokenizer."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from ._tokenizers import ByteTokenizer


@runtime_checkable
class Tokenizer(Protocol):
    """What the data pipeline needs from a tokenizer (:class:`ByteTokenizer` and
    :class:`HFTokenizer` satisfy it)."""

    @property
    def vocab_size(self) -> int: ...

    @property
    def eos_id(self) -> int | None: ...

    def encode(self, text: str) -> list[int]: ...

    def decode(self, ids: Sequence[int]) -> str: ...


def byte_tokenizer() -> Tokenizer:
    """The default tokenizer: UTF-8 bytes plus an EOS id (:class:`ByteTokenizer` without BOS).

    Documents are separated by EOS when packed, so the default has no BOS.
    """
    return ByteTokenizer(bos=False, eos=True)


def is_byte_level(tokenizer: Tokenizer) -> bool:
    """Whether ``tokenizer``'s ids are a text's UTF-8 bytes (specials only on request)."""
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
