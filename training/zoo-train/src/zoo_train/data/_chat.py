"""Instruction and chat examples: rendering with the tokenizer's chat template, and which tokens
the loss counts.

An example is a conversation (``messages``: role/content pairs, the format chat datasets use)
or a ``prompt``/``completion`` pair. A conversation is rendered with the tokenizer's own chat
template (``chat_template`` of ``tokenizer_config.json``, run by Jinja2 as ``transformers``
runs it), else by the plain fallback ``"{role}: {content}\\n"`` per message. The loss counts
only what the model should learn to say: each assistant message as the template renders it
(its end-of-turn marker included) or the completion, and the EOS after the example; the rest
(system and user turns, the prompt, the template's scaffolding) carries zero weight.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

# The role of the second part of a prompt/completion example (the first is PROMPT).
PROMPT, COMPLETION = "prompt", "completion"
ASSISTANT = "assistant"


def render_plain(messages: Sequence[tuple[str, str]], *, add_generation_prompt: bool) -> str:
    """The fallback chat format: ``"{role}: {content}\\n"`` per message (and ``"assistant: "``
    to prompt a reply)."""
    text = "".join(f"{role}: {content}\n" for role, content in messages)
    return text + (f"{ASSISTANT}: " if add_generation_prompt else "")


def _template_renderer(template: str, tokenizer: Any) -> Any:
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message: str) -> None:
        raise ValueError(f"The chat template refused an example: {message}")

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.globals["raise_exception"] = raise_exception
    compiled = env.from_string(template)
    specials = {
        "bos_token": _token_text(tokenizer, getattr(tokenizer, "bos_id", None)),
        "eos_token": _token_text(tokenizer, getattr(tokenizer, "eos_id", None)),
    }

    def render(messages: Sequence[tuple[str, str]], *, add_generation_prompt: bool) -> str:
        return compiled.render(
            messages=[{"role": r, "content": c} for r, c in messages],
            add_generation_prompt=add_generation_prompt,
            **specials,
        )

    return render


def _token_text(tokenizer: Any, token_id: int | None) -> str:
    if token_id is None:
        return ""
    inner = getattr(tokenizer, "tokenizer", None)  # a tokenizers.Tokenizer behind HFTokenizer
    return inner.id_to_token(token_id) if inner is not None else ""


def chat_renderer(tokenizer: Any) -> Any:
    """``render(messages, *, add_generation_prompt) -> str`` for ``tokenizer``: its chat
    template, else :func:`render_plain`."""
    template = getattr(tokenizer, "chat_template", None)
    return _template_renderer(template, tokenizer) if template else render_plain


def trained_spans(
    turns: Sequence[tuple[str, str]], tokenizer: Any
) -> tuple[str, list[tuple[int, int]], bool]:
    """The rendered text of an example, the character spans the loss counts, and whether the
    rendering decides BOS itself (a chat template writes ``bos_token`` when it wants one).

    Raises:
        ValueError: a template whose rendering of a conversation does not start with its
            rendering of the conversation's beginning (the spans would be ambiguous).
    """
    if turns and turns[0][0] == PROMPT:
        prompt, completion = turns[0][1], turns[1][1]
        return prompt + completion, [(len(prompt), len(prompt) + len(completion))], False
    render = chat_renderer(tokenizer)
    text = render(turns, add_generation_prompt=False)
    spans = []
    for i, (role, _) in enumerate(turns):
        if role != ASSISTANT:
            continue
        start = render(turns[:i], add_generation_prompt=True)
        upto = render(turns[: i + 1], add_generation_prompt=False)
        if not (text.startswith(upto) and upto.startswith(start)):
            raise ValueError(
                "The tokenizer's chat template does not render a conversation as its beginning "
                "plus the rest, so the assistant turns cannot be found in it; use plain text."
            )
        spans.append((len(start), len(upto)))
    # As transformers' apply_chat_template: a template writes BOS itself when it wants one.
    return text, spans, chat_renderer(tokenizer) is not render_plain


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
    text, spans, templated = trained_spans(turns, tokenizer)
    inner = getattr(tokenizer, "tokenizer", None)
    if inner is not None and hasattr(inner, "encode"):
        encoding = inner.encode(text, add_special_tokens=False)
        ids = list(encoding.ids)
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


def parse_example(record: dict[str, Any], where: str) -> tuple[tuple[str, str], ...] | None:
    """The turns of a JSON record with ``messages`` or ``prompt``/``completion`` (``None`` for
    a plain-text record).

    Raises:
        ValueError: malformed messages, or a conversation with no assistant message.
    """
    if "messages" in record:
        messages = record["messages"]
        ok = isinstance(messages, list) and all(
            isinstance(m, dict)
            and isinstance(m.get("role"), str)
            and isinstance(m.get("content"), str)
            for m in messages
        )
        if not ok or not messages:
            raise ValueError(
                f'{where}: `messages` must be a list of {{"role": ..., "content": ...}} '
                "with string values; fix the line."
            )
        turns = tuple((m["role"], m["content"]) for m in messages)
        if not any(role == ASSISTANT for role, _ in turns):
            raise ValueError(f"{where}: the conversation has no assistant message to learn.")
        return turns
    if "prompt" in record or "completion" in record:
        prompt, completion = record.get("prompt"), record.get("completion")
        if not isinstance(prompt, str) or not isinstance(completion, str):
            raise ValueError(
                f"{where}: `prompt` and `completion` must both be strings; fix the line."
            )
        return ((PROMPT, prompt), (COMPLETION, completion))
    return None
