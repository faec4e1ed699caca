"""Chat templates rendered exactly as ``transformers`` renders them.

A chat template is Jinja run in the environment ``transformers`` gives it (5.x,
``utils/chat_template_utils.py``): a sandbox with ``trim_blocks`` and ``lstrip_blocks``, the
``loopcontrols`` extension (``{% break %}``, ``{% continue %}``), the ``{% generation %}`` block
that marks assistant text (TRL's convention for the assistant-token mask), ``tojson`` that
leaves non-ASCII and HTML characters alone and takes ``indent``/``separators``/``sort_keys``,
and the globals ``raise_exception``, ``strftime_now``, ``dict`` and a ``namespace`` that refuses
underscore names. The conversation is prepared as ``apply_chat_template`` prepares it: keys
whose value is ``None`` dropped, reasoning aliased under ``reasoning_content`` and ``thinking``,
everything rebuilt from plain JSON types, the special tokens passed by name. ``transformers``
itself is not needed (it is a test dependency that checks this, token for token).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any, ClassVar

import jinja2
import jinja2.ext
import jinja2.nodes
import jinja2.runtime
import jinja2.utils
from jinja2.sandbox import ImmutableSandboxedEnvironment

__all__ = ["ChatTemplate", "ChatTemplateError", "RenderedChat"]

# The names a message's reasoning comes under; templates read the first (and gpt-oss `thinking`).
_REASONING_FIELDS = ("reasoning_content", "thinking", "reasoning")


class ChatTemplateError(ValueError):
    """A chat template that does not compile, or refuses a conversation (one sentence naming
    where the template came from)."""


@dataclasses.dataclass(frozen=True)
class RenderedChat:
    """A rendered conversation.

    Attributes:
        text: the text the template wrote.
        generation_spans: ``(start, end)`` character ranges of ``text`` inside
            ``{% generation %}`` blocks, in order (empty when the template has none).
    """

    text: str
    generation_spans: tuple[tuple[int, int], ...]


class _Generation(jinja2.ext.Extension):
    """``{% generation %}…{% endgeneration %}``: renders its body and notes where it landed."""

    tags: ClassVar[set[str]] = {"generation"}

    def __init__(self, environment: jinja2.Environment) -> None:
        super().__init__(environment)
        self.tracking: tuple[list[str], list[tuple[int, int]]] | None = None
        self.seen = False  # whether the template compiled holds a generation block

    def parse(self, parser: Any) -> jinja2.nodes.Node:
        self.seen = True
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        call = self.call_method("_span", [], [], None, None)
        return jinja2.nodes.CallBlock(call, [], [], body).set_lineno(lineno)

    def _span(self, caller: jinja2.runtime.Macro) -> str:
        text = caller()
        if self.tracking is not None:
            blocks, spans = self.tracking
            start = sum(len(b) for b in blocks)
            spans.append((start, start + len(text)))
        return text


class _TemplateDict:
    # `dict(...)` and `dict.fromkeys(...)` without handing the template the type itself.
    def __call__(self, *args: Any, **kwargs: Any) -> dict[Any, Any]:
        return dict(*args, **kwargs)

    def fromkeys(self, *args: Any, **kwargs: Any) -> dict[Any, Any]:
        return dict.fromkeys(*args, **kwargs)


class _Namespace(jinja2.utils.Namespace):
    # Jinja's namespace, refusing underscore names (no way to reach CPython internals).
    def __init__(*args: Any, **kwargs: Any) -> None:  # Jinja's trick: `self` may be a key
        self, args = args[0], args[1:]
        attrs = dict(*args, **kwargs)
        for name in attrs:
            _Namespace._check(name)
        jinja2.utils.Namespace.__init__(self, attrs)

    def __setitem__(self, name: str, value: Any) -> None:
        _Namespace._check(name)
        jinja2.utils.Namespace.__setitem__(self, name, value)

    @staticmethod
    def _check(name: Any) -> None:
        if isinstance(name, str) and name.startswith("_"):
            raise jinja2.exceptions.SecurityError(
                f"Chat templates cannot store underscore-prefixed attributes on a namespace, "
                f"but got {name!r}."
            )


def _raise_exception(message: str) -> None:
    raise jinja2.exceptions.TemplateError(message)


def _tojson(
    x: Any,
    ensure_ascii: bool = False,
    indent: int | None = None,
    separators: tuple[str, str] | None = None,
    sort_keys: bool = False,
) -> str:
    return json.dumps(
        x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys
    )


def _strftime_now(format: str) -> str:
    return datetime.now().strftime(format)


def _environment() -> ImmutableSandboxedEnvironment:
    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[_Generation, jinja2.ext.loopcontrols]
    )
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    env.globals["dict"] = _TemplateDict()
    env.globals["namespace"] = _Namespace
    return env


def _plain(value: Any) -> Any:
    """``value`` rebuilt from plain JSON types (anything else becomes ``"<TypeName>"``), as
    ``transformers`` hands data to a template."""
    if value is None or type(value) in (str, int, float, bool):
        return value
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, int):
        return int.__int__(value)
    if isinstance(value, float):
        return float.__float__(value)
    if isinstance(value, Mapping):
        return {_plain(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_plain(v) for v in value)
    return f"<{type(value).__name__}>"


def _messages(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The conversation as ``apply_chat_template`` passes it: ``None`` values dropped, plain
    types, reasoning under ``reasoning_content`` (and ``thinking``)."""
    out = []
    for message in messages:
        if not isinstance(message, Mapping):
            raise TypeError(f"A chat message must be a mapping, got {message!r}.")
        m = _plain({k: v for k, v in message.items() if v is not None})
        reasoning = next((m[k] for k in _REASONING_FIELDS if m.get(k) is not None), None)
        if reasoning is not None:
            m = {"thinking": reasoning, **m, "reasoning_content": reasoning}
        out.append(m)
    return out


class ChatTemplate:
    """A chat template, compiled once, rendering as ``transformers``' ``apply_chat_template``.

    Args:
        source: the Jinja text.
        origin: where it came from (a file), named in errors.
        variables: the tokenizer's special tokens by name (``bos_token``, ``eos_token``, …),
            passed to every rendering as ``apply_chat_template`` passes them.

    Raises:
        ChatTemplateError: the template does not compile.
    """

    def __init__(
        self,
        source: str,
        *,
        origin: str = "the chat template",
        variables: Mapping[str, str] | None = None,
    ) -> None:
        self.source = source
        self.origin = origin
        self.variables = dict(variables or {})
        env = _environment()
        self._generation = env.extensions[_Generation.identifier]
        try:
            self._template = env.from_string(source)
        except jinja2.TemplateSyntaxError as e:
            first = (e.message or "a syntax error").split(". ")[0].rstrip(".")
            raise ChatTemplateError(
                f"The chat template in {origin} does not compile at line {e.lineno} ({first}); "
                "fix the template or use a tokenizer with a working one."
            ) from None
        #: Whether the template marks assistant text with ``{% generation %}`` blocks.
        self.has_generation_blocks: bool = self._generation.seen

    @contextmanager
    def _tracking(self, blocks: list[str], spans: list[tuple[int, int]]) -> Iterator[None]:
        self._generation.tracking = (blocks, spans)
        try:
            yield
        finally:
            self._generation.tracking = None

    def render(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        add_generation_prompt: bool = False,
        tools: Sequence[Mapping[str, Any]] | None = None,
        documents: Sequence[Mapping[str, Any]] | None = None,
        **kwargs: Any,
    ) -> RenderedChat:
        """Render ``messages`` (dicts with ``role``, ``content`` and any other fields, e.g.
        ``reasoning_content``, ``tool_calls``) with the template's variables, ``tools`` and
        ``documents`` (JSON schemas and ``{"title", "text"}`` dicts) and ``kwargs``.

        Raises:
            ChatTemplateError: the template refused the conversation (``raise_exception``) or
                failed on it.
        """
        blocks: list[str] = []
        spans: list[tuple[int, int]] = []
        context = {
            **self.variables,
            **_plain(kwargs),
            "messages": _messages(messages),
            "tools": _plain(None if tools is None else list(tools)),
            "documents": _plain(None if documents is None else list(documents)),
            "add_generation_prompt": add_generation_prompt,
        }
        try:
            with self._tracking(blocks, spans):
                for block in self._template.generate(**context):
                    blocks.append(block)
        except Exception as e:  # a template is a program: whatever it raises is its refusal
            message = " ".join(str(e).split()) or type(e).__name__
            raise ChatTemplateError(
                f"The chat template in {self.origin} failed on a conversation: "
                f"{message.rstrip('.')}."
            ) from None
        return RenderedChat("".join(blocks), tuple(spans))
