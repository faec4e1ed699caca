"""Chat prompts as lm-eval asks for them: the conversation rendered with the tokenizer's chat
template, either opening the assistant's turn or continuing its last, unfinished message."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from zoo_data import render_chat

logger = logging.getLogger("zoo_train")


def render_history(
    tokenizer: Any, history: Sequence[Mapping[str, Any]], *, add_generation_prompt: bool
) -> str:
    """The text of ``history`` (``{"role", "content"}`` dicts) in the tokenizer's chat format.

    With ``add_generation_prompt`` the text opens the assistant's turn; without it the last
    message is continued (the text ends where its content ends, as ``transformers``'
    ``continue_final_message`` does). A template that refuses the conversation is tried again
    without its system messages, as lm-eval's Hugging Face backend does.
    """
    try:
        return _render(tokenizer, history, add_generation_prompt)
    except ValueError as e:
        logger.warning("the chat template failed (%s); trying without the system messages", e)
        kept = [m for m in history if m.get("role") != "system"]
        return _render(tokenizer, kept, add_generation_prompt)


def _render(
    tokenizer: Any, history: Sequence[Mapping[str, Any]], add_generation_prompt: bool
) -> str:
    text = render_chat(history, tokenizer, add_generation_prompt=add_generation_prompt)
    if add_generation_prompt or not history:
        return text
    # Continuing the last message: cut what the template writes after its content.
    content = str(history[-1].get("content", ""))
    at = text.rfind(content.strip()) if content.strip() else -1
    if at < 0:
        raise ValueError("the rendered conversation does not contain its last message")
    return text[: at + len(content.strip())]
