"""Preference pairs: records in TRL's two layouts, read as documents of two examples.

A pair is a prompt with a preferred (``chosen``) and a dispreferred (``rejected``) response:

- standard: ``{"prompt": "...", "chosen": "...", "rejected": "..."}``, each side encoded as a
  prompt/completion example;
- conversational: ``prompt`` a list of messages, ``chosen`` and ``rejected`` lists of assistant
  messages, each side rendered with the tokenizer's chat template as prompt plus reply.

Each side is encoded as supervised fine-tuning encodes an example (:func:`~._chat.encode_example`:
BOS and EOS by the same rule, weight only on the response tokens). A record that cannot be a
pair (a side missing, a reply that is not an assistant message) is an error naming its file and
line; a pair that carries no preference (identical sides, an empty response) is skipped and
counted (:data:`SKIP_REASONS`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ._chat import ASSISTANT, COMPLETION, PROMPT, Conversation, Turn, parse_messages
from ._documents import Document

CHOSEN, REJECTED = "chosen", "rejected"
#: Why a pair is skipped, and how a count of them reads.
SKIP_REASONS = {
    "identical": "whose chosen and rejected responses are identical",
    "empty": "with an empty response",
}


def is_pair_record(record: Any) -> bool:
    """Whether a JSON record is meant as a preference pair (it has ``chosen`` or ``rejected``)."""
    return isinstance(record, Mapping) and (CHOSEN in record or REJECTED in record)


def _reply(value: Any, where: str, field: str) -> list[Turn]:
    turns = parse_messages(value, where, field)
    if any(t[0] != ASSISTANT for t in turns):
        raise ValueError(
            f"{where}: the {field} reply must be assistant messages, but it holds a "
            f"{next(t[0] for t in turns if t[0] != ASSISTANT)!r} message; fix the line."
        )
    return turns


def parse_pair(record: Mapping[str, Any], where: str) -> tuple[Any, Any] | str:
    """The two examples of a pair record, ``(chosen turns, rejected turns)``, each the prompt
    and one response; or the reason it is skipped (a key of :data:`SKIP_REASONS`).

    Raises:
        ValueError: one sentence naming ``where``: a side or the prompt missing, values of
            the wrong kind, or a conversational reply that is not an assistant message.
    """
    if CHOSEN not in record or REJECTED not in record:
        missing = REJECTED if CHOSEN in record else CHOSEN
        raise ValueError(
            f"{where}: a preference pair needs both `chosen` and `rejected`, and `{missing}` is "
            "missing; fix the line."
        )
    prompt, chosen, rejected = record.get(PROMPT), record[CHOSEN], record[REJECTED]
    if isinstance(prompt, str) and isinstance(chosen, str) and isinstance(rejected, str):
        if not chosen.strip() or not rejected.strip():
            return "empty"
        if chosen == rejected:
            return "identical"
        return ((PROMPT, prompt), (COMPLETION, chosen)), ((PROMPT, prompt), (COMPLETION, rejected))
    if isinstance(prompt, list):
        context = parse_messages(prompt, where, PROMPT)
        good, bad = _reply(chosen, where, CHOSEN), _reply(rejected, where, REJECTED)
        if not all(t[1].strip() for t in good) or not all(t[1].strip() for t in bad):
            return "empty"
        if [t.message for t in good] == [t.message for t in bad]:
            return "identical"
        tools, documents = record.get("tools"), record.get("documents")
        return (
            Conversation([*context, *good], tools, documents, reply=len(good)),
            Conversation([*context, *bad], tools, documents, reply=len(bad)),
        )
    raise ValueError(
        f"{where}: a preference pair is `prompt`, `chosen` and `rejected` as three strings, or "
        "a list of messages and two lists of assistant messages; fix the line."
    )


def pair_documents(
    record: Mapping[str, Any], name: str, where: str, skip: Callable[[str, str], None] | None
) -> Iterable[Document]:
    """The document of one pair record (none when it is skipped: ``skip(reason, where)``)."""
    parsed = parse_pair(record, where)
    if isinstance(parsed, str):
        if skip is not None:
            skip(parsed, where)
        return []
    chosen, rejected = parsed
    text = "\n".join(c for _, c in chosen) + "\n" + rejected[-1][1]
    return [Document(name, text, chosen, rejected=rejected)]


def skipped_sentence(reason: str, count: int, first: str) -> str:
    """``"skipped 3 pairs whose chosen and rejected responses are identical (first: f:7)"``."""
    return (
        f"skipped {count} pair{'s' if count != 1 else ''} {SKIP_REASONS.get(reason, reason)} "
        f"(first: {first})"
    )
