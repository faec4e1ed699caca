"""Prompting a chat model: a conversation rendered with the model's chat template and its
generation prompt (as the fine-tuning data was rendered), and the tokens that end its turn."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from zoo_data import render_chat

# A reply no template writes by itself, to find what a template puts after a reply.
_PROBE = "zoo-probe-reply"


def chat_prompt_ids(tokenizer: Any, messages: Sequence[Mapping[str, Any]]) -> list[int]:
    """The ids of ``messages`` (``{"role", "content"}`` dicts) rendered with the tokenizer's
    chat template (else the plain ``"role: content"`` format) and the generation prompt, encoded
    as ``apply_chat_template`` encodes them: no BOS beyond what the template writes.

    Raises:
        ValueError: the template does not compile or refuses the conversation.
    """
    text = render_chat(messages, tokenizer, add_generation_prompt=True)
    return list(tokenizer.encode(text))


def end_of_turn_ids(tokenizer: Any) -> tuple[int, ...]:
    """The token the chat template writes right after a reply, when it is a special token of
    the vocabulary (``<|im_end|>``, ``<|eot_id|>``, ``<end_of_turn>``, ``</s>``); for the plain
    format, the newline ending each message when it is one token. Empty when neither."""
    probe = [{"role": "user", "content": "?"}, {"role": "assistant", "content": _PROBE}]
    try:
        text = render_chat(probe, tokenizer, add_generation_prompt=False)
    except ValueError:  # a template that refuses the probe: no end-of-turn token found
        return ()
    at = text.rfind(_PROBE)
    if at < 0:
        return ()
    after = text[at + len(_PROBE) :]
    ids = list(tokenizer.encode(after)) if after else []
    if not ids:
        return ()
    inner = getattr(tokenizer, "tokenizer", None)
    added = set(inner.get_added_tokens_decoder()) if inner is not None else set()
    if ids[0] in added or ids[0] == tokenizer.eos_id:
        return (int(ids[0]),)
    if getattr(tokenizer, "compiled_chat_template", None) is None or not tokenizer.chat_template:
        newline = list(tokenizer.encode("\n"))
        if len(newline) == 1 and ids[0] == newline[0]:
            return (int(ids[0]),)
    return ()
