"""Reward functions shipped with zoo, in TRL's signature
``fn(prompts, completions, **columns) -> list[float | None]``; each is named on the command line
by its bare name (``--reward answer_match``). The factories make variants for a reward file."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

RewardFn = Callable[..., list[float | None]]


def completion_text(completion: Any) -> str:
    """The text of a completion: a string, or the content of the last of a list of chat
    messages (as TRL passes completions of conversational prompts)."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, Sequence) and completion and isinstance(completion[-1], dict):
        return str(completion[-1].get("content", ""))
    return str(completion)


def _normalise(text: str) -> str:
    return " ".join(text.strip().split()).rstrip(".").replace(",", "").lower()


def make_answer_match(marker: str = "####") -> RewardFn:
    """1.0 where the text after the completion's last ``marker`` equals the row's ``answer``
    (whitespace, case, thousands separators and a final period aside), else 0.0; ``None`` for a
    row without an answer."""

    def answer_match(
        prompts: list[Any], completions: list[Any], answer: list[Any] | None = None, **_: Any
    ) -> list[float | None]:
        if answer is None:
            raise ValueError("answer_match needs an `answer` column in the prompts' file.")
        out: list[float | None] = []
        for completion, expected in zip(completions, answer, strict=True):
            if expected is None:
                out.append(None)
                continue
            text = completion_text(completion)
            found = text.rsplit(marker, 1)[1] if marker in text else None
            ok = found is not None and _normalise(found) == _normalise(str(expected))
            out.append(1.0 if ok else 0.0)
        return out

    answer_match.__name__ = "answer_match"
    return answer_match


def make_format_match(pattern: str, *, flags: int = re.DOTALL) -> RewardFn:
    """1.0 where the whole completion matches the regular expression ``pattern``, else 0.0."""
    compiled = re.compile(pattern, flags)

    def format_match(prompts: list[Any], completions: list[Any], **_: Any) -> list[float | None]:
        return [1.0 if compiled.fullmatch(completion_text(c).strip()) else 0.0 for c in completions]

    format_match.__name__ = "format_match"
    return format_match


def make_length_penalty(max_chars: int = 1000) -> RewardFn:
    """``-min(1, max(0, n - max_chars) / max_chars)`` for a completion of ``n`` characters: 0
    up to ``max_chars``, falling linearly to -1 at twice that."""
    if max_chars < 1:
        raise ValueError(f"max_chars must be at least 1, got {max_chars}.")

    def length_penalty(prompts: list[Any], completions: list[Any], **_: Any) -> list[float | None]:
        lengths = [len(completion_text(c)) for c in completions]
        return [-min(1.0, max(0, n - max_chars) / max_chars) for n in lengths]

    length_penalty.__name__ = "length_penalty"
    return length_penalty


#: ``answer_match``: the text after ``####`` equals the ``answer`` column;
#: ``format_match``: ``<think>…</think>`` then ``<answer>…</answer>``;
#: ``length_penalty``: 0 up to 1000 characters, -1 from 2000.
BUILTIN_REWARDS: dict[str, RewardFn] = {
    "answer_match": make_answer_match(),
    "format_match": make_format_match(r"<think>.*?</think>\s*<answer>.*?</answer>"),
    "length_penalty": make_length_penalty(),
}
