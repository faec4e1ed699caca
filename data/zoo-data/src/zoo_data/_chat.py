"""Instruction and chat examples: rendering with the tokenizer's chat template, and which tokens
the loss counts.

An example is a conversation (``messages``: the format chat datasets use, each message a
``role``, its ``content`` and any other fields a template reads, such as ``reasoning_content``
or ``tool_calls``; with the example's ``tools`` and ``documents`` when it has them) or a
``prompt``/``completion`` pair. A conversation is rendered with the tokenizer's own chat
template exactly as ``transformers`` renders it (:class:`~zoo_data.ChatTemplate`), else by the
plain fallback ``"{role}: {content}\\n"`` per message. The loss counts only what the model
should learn to say: where the template marks assistant text with ``{% generation %}`` blocks,
the tokens those blocks wrote (as ``transformers``' assistant mask marks them); otherwise each
assistant message as the template renders it (its end-of-turn marker included) or the
completion; and the EOS after the example. The rest (system and user turns, the prompt, the
template's scaffolding) carries zero weight.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

# The role of the second part of a prompt/completion example (the first is PROMPT).
PROMPT, COMPLETION = "prompt", "completion"
ASSISTANT = "assistant"


class Turn(tuple):
    """One message of an example: the pair ``(role, content)`` (``content`` as text), with the
    whole message, every field of it, as :attr:`message`."""

    message: dict[str, Any]

    def __new__(cls, role: str, content: str, message: Mapping[str, Any] | None = None) -> Turn:
        turn = super().__new__(cls, (role, content))
        turn.message = dict(message) if message is not None else {"role": role, "content": content}
        return turn

    def __reduce__(self) -> tuple[Any, ...]:
        return (Turn, (self[0], self[1], self.message))


class Conversation(tuple):
    """The turns of a conversation, with the ``tools`` and ``documents`` its template is given,
    and ``reply``: how many of its last assistant turns the loss counts (``None``: every one;
    a preference pair's side counts its response alone, not assistant turns of its prompt)."""

    tools: list[Any] | None
    documents: list[Any] | None
    reply: int | None

    def __new__(
        cls,
        turns: Sequence[Turn],
        tools: list[Any] | None = None,
        documents: list[Any] | None = None,
        reply: int | None = None,
    ) -> Conversation:
        conversation = super().__new__(cls, tuple(turns))
        conversation.tools, conversation.documents = tools, documents
        conversation.reply = reply
        return conversation

    def __reduce__(self) -> tuple[Any, ...]:
        return (Conversation, (tuple(self), self.tools, self.documents, self.reply))


def _message(turn: Any) -> dict[str, Any]:
    """A turn as the message a template reads: a :class:`Turn`'s whole message, a mapping as
    it is, a ``(role, content)`` pair as those two fields."""
    if isinstance(turn, Mapping):
        return dict(turn)
    return getattr(turn, "message", None) or {"role": turn[0], "content": turn[1]}


def _messages(turns: Sequence[Any]) -> list[dict[str, Any]]:
    return [_message(t) for t in turns]


def _pairs(turns: Sequence[Any]) -> list[tuple[str, str]]:
    return [(m["role"], m.get("content") or "") for m in _messages(turns)]


#: :func:`render_plain` as a Jinja chat template (``transformers``' ``apply_chat_template``
#: renders the same text): what an export of a model that trained on the plain format carries.
PLAIN_CHAT_TEMPLATE = (
    "{% for message in messages %}{{ message['role'] }}: "
    "{{ message['content'] if message['content'] else '' }}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant: {% endif %}"
)


def render_plain(messages: Sequence[tuple[str, str]], *, add_generation_prompt: bool) -> str:
    """The fallback chat format: ``"{role}: {content}\\n"`` per message (and ``"assistant: "``
    to prompt a reply)."""
    text = "".join(f"{role}: {content}\n" for role, content in messages)
    return text + (f"{ASSISTANT}: " if add_generation_prompt else "")


def chat_template(tokenizer: Any) -> Any:
    """The tokenizer's compiled chat template (:class:`~zoo_data.ChatTemplate`), or ``None``
    (no template: the plain format).

    Raises:
        ValueError: the template does not compile (one sentence naming its file).
    """
    compiled = getattr(tokenizer, "compiled_chat_template", None)
    return compiled() if compiled is not None else None


def render_chat(turns: Sequence[Any], tokenizer: Any, *, add_generation_prompt: bool) -> str:
    """The text of a conversation (:class:`Turn` s, message dicts or ``(role, content)``
    pairs) as the tokenizer's chat template writes it (else :func:`render_plain`).

    Raises:
        ValueError: the template does not compile or refuses the conversation.
    """
    template = chat_template(tokenizer)
    if template is None:
        return render_plain(_pairs(turns), add_generation_prompt=add_generation_prompt)
    return template.render(
        _messages(turns),
        add_generation_prompt=add_generation_prompt,
        tools=getattr(turns, "tools", None),
        documents=getattr(turns, "documents", None),
    ).text


def trained_spans(
    turns: Sequence[Sequence[Any]], tokenizer: Any
) -> tuple[str, list[tuple[int, int]], bool, bool]:
    """The rendered text of an example, the character spans the loss counts, whether the
    rendering decides BOS itself (a chat template writes ``bos_token`` when it wants one), and
    whether the spans are ``{% generation %}`` blocks (a token counts when it overlaps one,
    as in ``transformers``' assistant mask; else when it starts inside one).

    Raises:
        ValueError: a template that fails on the example, or one without generation blocks
            whose rendering of a conversation does not start with its rendering of the
            conversation's beginning (the spans would be ambiguous).
    """
    if turns and turns[0][0] == PROMPT:
        prompt, completion = turns[0][1], turns[1][1]
        return prompt + completion, [(len(prompt), len(prompt) + len(completion))], False, False
    template = chat_template(tokenizer)
    if template is None:
        pairs = _pairs(turns)
        text = render_plain(pairs, add_generation_prompt=False)
        spans = _prefix_spans(
            pairs, lambda part, gen: render_plain(part, add_generation_prompt=gen)
        )
        return text, spans, False, False
    extra = {"tools": getattr(turns, "tools", None), "documents": getattr(turns, "documents", None)}
    messages = _messages(turns)
    rendered = template.render(messages, **extra)
    if template.has_generation_blocks:
        return rendered.text, list(rendered.generation_spans), True, True

    def render(part: Sequence[Any], gen: bool) -> str:
        return template.render(part, add_generation_prompt=gen, **extra).text

    return rendered.text, _prefix_spans(messages, render, rendered.text), True, False


def _prefix_spans(
    turns: Sequence[Any], render: Any, text: str | None = None
) -> list[tuple[int, int]]:
    """Each assistant turn's span: from the rendering of the turns before it with the
    generation prompt to the rendering that ends with it."""
    text = render(turns, False) if text is None else text
    spans = []
    for i, turn in enumerate(turns):
        role = turn["role"] if isinstance(turn, Mapping) else turn[0]
        if role != ASSISTANT:
            continue
        start = render(turns[:i], True)
        upto = render(turns[: i + 1], False)
        if not (text.startswith(upto) and upto.startswith(start)):
            raise ValueError(
                "The tokenizer's chat template does not render a conversation as its beginning "
                "plus the rest, so the assistant turns cannot be found in it; mark them with "
                "{% generation %} blocks in the template, or use plain text."
            )
        spans.append((len(start), len(upto)))
    return spans


def _pieces(text: str, spans: list[tuple[int, int]]) -> list[tuple[str, bool]]:
    out, at = [], 0
    for start, end in spans:
        out += [(text[at:start], False), (text[start:end], True)]
        at = end
    return [p for p in [*out, (text[at:], False)] if p[0]]


def encode_example(
    turns: Sequence[tuple[str, str]], tokenizer: Any, *, bos: int | None, eos: int | None
) -> tuple[np.ndarray, np.ndarray]:
    """``(ids, trained)`` of one example: int32 token ids (BOS first when ``bos`` is given,
    unless a chat template rendered the example; ``eos`` last, unless the rendering already
    ends with it) and a float32 weight per token, 1 on the assistant or completion tokens and
    the EOS, 0 elsewhere.

    A token counts when it starts inside a counted span (from the tokenizer's character
    offsets when it has them, else by encoding the spans one by one).
    """
    text, spans, templated, overlap = trained_spans(turns, tokenizer)
    reply = getattr(turns, "reply", None)
    if reply is not None:  # the last assistant turns alone (a pair's response, not its prompt)
        spans = spans[-reply:]
    inner = getattr(tokenizer, "tokenizer", None)
    if inner is not None and hasattr(inner, "encode"):
        encoding = inner.encode(text, add_special_tokens=False)
        ids = list(encoding.ids)
        if overlap:
            trained = [any(a < e and b > s for s, e in spans) for a, b in encoding.offsets]
        else:
            trained = [any(s <= start < e for s, e in spans) for start, _ in encoding.offsets]
    else:
        ids, trained = [], []
        for piece, counted in _pieces(text, spans):
            piece_ids = tokenizer.encode(piece)
            ids += piece_ids
            trained += [counted] * len(piece_ids)
    if bos is not None and not templated:
        ids, trained = [bos, *ids], [False, *trained]
    # A template that ends the reply with EOS itself (Mistral's, Llama 2's) gets no second one:
    # the model would learn to say EOS after EOS.
    if eos is not None and (not ids or ids[-1] != eos):
        ids, trained = [*ids, eos], [*trained, True]
    return np.asarray(ids, np.int32), np.asarray(trained, np.float32)


def _content_text(content: Any) -> str | None:
    """A message's content as text (``""`` when absent, the text parts of a list of content
    blocks), or ``None`` when it is neither."""
    if content is None or isinstance(content, str):
        return content or ""
    if isinstance(content, list) and all(isinstance(b, dict) for b in content):
        return "".join(b["text"] for b in content if isinstance(b.get("text"), str))
    return None


def _list_of_dicts(value: Any) -> bool:
    return value is None or (isinstance(value, list) and all(isinstance(v, dict) for v in value))


def parse_messages(messages: Any, where: str, field: str = "messages") -> list[Turn]:
    """The turns of a non-empty list of messages (each with a string ``role`` and text
    ``content``, every other field kept).

    Raises:
        ValueError: one sentence naming ``where`` and ``field``.
    """
    ok = isinstance(messages, list) and all(
        isinstance(m, dict)
        and isinstance(m.get("role"), str)
        and _content_text(m.get("content")) is not None
        for m in messages
    )
    if not ok or not messages:
        raise ValueError(
            f'{where}: `{field}` must be a list of {{"role": ..., "content": ...}} messages '
            "with string roles and text contents; fix the line."
        )
    return [Turn(m["role"], _content_text(m.get("content")) or "", m) for m in messages]


def parse_example(record: dict[str, Any], where: str) -> tuple[tuple[str, str], ...] | None:
    """The turns of a JSON record with ``messages`` or ``prompt``/``completion`` (``None`` for
    a plain-text record).

    A conversation's messages keep every field (:class:`Turn`), and its ``tools`` and
    ``documents`` travel with it (:class:`Conversation`) to the chat template.

    Raises:
        ValueError: malformed messages, or a conversation with no assistant message.
    """
    if "messages" in record:
        turns = parse_messages(record["messages"], where)
        if not (_list_of_dicts(record.get("tools")) and _list_of_dicts(record.get("documents"))):
            raise ValueError(f"{where}: `tools` and `documents` must be lists of objects.")
        if not any(turn[0] == ASSISTANT for turn in turns):
            raise ValueError(f"{where}: the conversation has no assistant message to learn.")
        return Conversation(turns, record.get("tools"), record.get("documents"))
    if "prompt" in record or "completion" in record:
        prompt, completion = record.get("prompt"), record.get("completion")
        if not isinstance(prompt, str) or not isinstance(completion, str):
            raise ValueError(
                f"{where}: `prompt` and `completion` must both be strings; fix the line."
            )
        return ((PROMPT, prompt), (COMPLETION, completion))
    return None
