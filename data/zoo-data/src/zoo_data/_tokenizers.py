"""Tokenizers: a built-in byte-level one and local ``tokenizer.json`` files.

Both classes share one interface (``encode``/``decode``/``vocab_size``/``bos_id``/``eos_id``), so
generation and data code never care which one a checkpoint came with.
"""

from __future__ import annotations

import functools
import json
import pathlib
from collections.abc import Mapping, Sequence
from typing import Protocol, runtime_checkable

import tokenizers
import tokenizers.decoders
import tokenizers.models
import tokenizers.pre_tokenizers
import tokenizers.processors

from ._chat_template import ChatTemplate

__all__ = ["ByteTokenizer", "HFTokenizer", "ZooTokenizer", "load_tokenizer"]


@runtime_checkable
class ZooTokenizer(Protocol):
    """What every zoo tokenizer offers."""

    @property
    def vocab_size(self) -> int: ...

    @property
    def bos_id(self) -> int | None: ...

    @property
    def eos_id(self) -> int | None: ...

    @property
    def add_bos(self) -> bool:
        """Whether the tokenizer's own configuration puts BOS before a text."""
        ...

    def encode(self, text: str, *, add_bos: bool = False, add_eos: bool = False) -> list[int]: ...

    def decode(self, ids: Sequence[int], *, skip_special: bool = True) -> str: ...


def _add_specials(
    ids: list[int], bos_id: int | None, eos_id: int | None, add_bos: bool, add_eos: bool
) -> list[int]:
    if add_bos:
        if bos_id is None:
            raise ValueError("add_bos=True needs a tokenizer with a BOS token; pass add_bos=False.")
        ids = [bos_id, *ids]
    if add_eos:
        if eos_id is None:
            raise ValueError(
                "add_eos=True needs a tokenizer with an EOS token; pass add_eos=False."
            )
        ids = [*ids, eos_id]
    return ids


class ByteTokenizer:
    """UTF-8 bytes as ids ``0..255``, plus optional BOS/EOS ids after them.

    With both specials the vocabulary is ``[0..255 bytes, 256 BOS, 257 EOS]``; with one, that one
    is ``256``. ``decode(encode(s)) == s`` for every string (any Unicode text encodes to UTF-8).
    """

    def __init__(self, *, bos: bool = True, eos: bool = True) -> None:
        next_id = 256
        self._bos_id: int | None = None
        self._eos_id: int | None = None
        if bos:
            self._bos_id, next_id = next_id, next_id + 1
        if eos:
            self._eos_id, next_id = next_id, next_id + 1
        self._vocab_size = next_id

    @property
    def vocab_size(self) -> int:
        return self._vocab_size

    @property
    def bos_id(self) -> int | None:
        return self._bos_id

    @property
    def eos_id(self) -> int | None:
        return self._eos_id

    @property
    def add_bos(self) -> bool:
        """A byte tokenizer with a BOS id starts every text with it."""
        return self._bos_id is not None

    def save(self, directory: str | pathlib.Path) -> None:
        """Write these ids as a ``tokenizer.json`` that ``tokenizers`` and ``transformers``
        load: a byte-level vocabulary with id ``b`` for byte ``b`` and the specials after."""
        directory = pathlib.Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        alphabet = _byte_alphabet()
        vocab = {alphabet[b]: b for b in range(256)}
        tok = tokenizers.Tokenizer(tokenizers.models.BPE(vocab=vocab, merges=[]))
        tok.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(
            add_prefix_space=False, use_regex=False
        )
        tok.decoder = tokenizers.decoders.ByteLevel()
        specials = [t for t, i in (("<s>", self._bos_id), ("</s>", self._eos_id)) if i is not None]
        tok.add_special_tokens(specials)
        if self._bos_id is not None:
            tok.post_processor = tokenizers.processors.TemplateProcessing(
                single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", self._bos_id)]
            )
        tok.save(str(directory / "tokenizer.json"))
        _write_config(
            directory,
            bos="<s>" if self._bos_id is not None else None,
            eos="</s>" if self._eos_id is not None else None,
            add_bos=self.add_bos,
        )

    def encode(self, text: str, *, add_bos: bool = False, add_eos: bool = False) -> list[int]:
        """``text`` → byte ids, optionally wrapped in BOS/EOS."""
        return _add_specials(
            list(text.encode("utf-8")), self._bos_id, self._eos_id, add_bos, add_eos
        )

    def decode(self, ids: Sequence[int], *, skip_special: bool = True) -> str:
        """Ids → text. Invalid UTF-8 (e.g. a cut multi-byte character) decodes as U+FFFD.

        With ``skip_special=False`` BOS/EOS appear as ``<s>`` and ``</s>``.
        """
        out = bytearray()
        for i in ids:
            i = int(i)
            if 0 <= i < 256:
                out.append(i)
            elif i == self._bos_id:
                out.extend(b"" if skip_special else b"<s>")
            elif i == self._eos_id:
                out.extend(b"" if skip_special else b"</s>")
            else:
                raise ValueError(
                    f"Token id {i} is outside this byte tokenizer's vocabulary of {self._vocab_size}."
                )
        return out.decode("utf-8", errors="replace")

    def __repr__(self) -> str:
        return f"ByteTokenizer(bos={self._bos_id is not None}, eos={self._eos_id is not None})"


class HFTokenizer:
    """A ``tokenizers.Tokenizer`` (from a ``tokenizer.json``) behind the zoo interface.

    ``encode`` adds no special tokens of its own template; BOS/EOS are added only on request,
    the same as with :class:`ByteTokenizer`. ``add_bos`` says whether the tokenizer's own
    configuration starts a text with BOS: what the ``tokenizer.json`` post-processor does
    (unless ``add_bos`` is given), so that training, evaluation and generation all follow it.
    ``chat_template`` is the Jinja template of ``tokenizer_config.json``, if any, read from
    ``chat_template_origin`` (named in its errors); ``special_tokens`` are the special tokens by
    name (``bos_token``, ``eos_token``, ``unk_token``, …), as ``transformers`` hands them to the
    template (default: BOS and EOS).
    """

    def __init__(
        self,
        tokenizer: tokenizers.Tokenizer,
        *,
        bos_token: str | None = None,
        eos_token: str | None = None,
        add_bos: bool | None = None,
        chat_template: str | None = None,
        special_tokens: Mapping[str, str] | None = None,
        chat_template_origin: str | None = None,
    ) -> None:
        self._tok = tokenizer
        self._bos_id = self._special_id(bos_token, "bos_token")
        self._eos_id = self._special_id(eos_token, "eos_token")
        if add_bos is None:
            add_bos = self._post_processor_adds_bos()
        self._add_bos = bool(add_bos) and self._bos_id is not None
        self.chat_template = chat_template
        self.chat_template_origin = chat_template_origin
        if special_tokens is None:
            special_tokens = {
                k: v for k, v in (("bos_token", bos_token), ("eos_token", eos_token)) if v
            }
        self.special_tokens = dict(special_tokens)

    def compiled_chat_template(self) -> ChatTemplate | None:
        """The chat template, compiled as ``transformers`` compiles it (``None``: none).

        Raises:
            ChatTemplateError: it does not compile (the sentence names its file).
        """
        if not self.chat_template:
            return None
        origin = self.chat_template_origin or "the tokenizer's configuration"
        return _compiled(self.chat_template, origin, tuple(sorted(self.special_tokens.items())))

    def _post_processor_adds_bos(self) -> bool:
        if self._bos_id is None:
            return False
        ids = self._tok.encode("a", add_special_tokens=True).ids
        return bool(ids) and ids[0] == self._bos_id

    def _special_id(self, token: str | None, what: str) -> int | None:
        if token is None:
            return None
        tid = self._tok.token_to_id(token)
        if tid is None:
            raise ValueError(f"{what} {token!r} is not in the tokenizer's vocabulary.")
        return tid

    @classmethod
    def from_file(
        cls, path: str | pathlib.Path, *, bos_token: str | None = None, eos_token: str | None = None
    ) -> HFTokenizer:
        """Load a ``tokenizer.json`` file (a file that is not one: ``ValueError`` naming it)."""
        return cls(_read_tokenizer(pathlib.Path(path)), bos_token=bos_token, eos_token=eos_token)

    @property
    def tokenizer(self) -> tokenizers.Tokenizer:
        """The wrapped ``tokenizers.Tokenizer``."""
        return self._tok

    @property
    def vocab_size(self) -> int:
        return self._tok.get_vocab_size(with_added_tokens=True)

    @property
    def bos_id(self) -> int | None:
        return self._bos_id

    @property
    def eos_id(self) -> int | None:
        return self._eos_id

    @property
    def add_bos(self) -> bool:
        return self._add_bos

    def encode(self, text: str, *, add_bos: bool = False, add_eos: bool = False) -> list[int]:
        """``text`` → ids, optionally wrapped in BOS/EOS."""
        ids = self._tok.encode(text, add_special_tokens=False).ids
        return _add_specials(list(ids), self._bos_id, self._eos_id, add_bos, add_eos)

    def decode(self, ids: Sequence[int], *, skip_special: bool = True) -> str:
        """Ids → text."""
        return self._tok.decode([int(i) for i in ids], skip_special_tokens=skip_special)

    def save(self, directory: str | pathlib.Path) -> None:
        """Write ``tokenizer.json`` (and ``tokenizer_config.json`` naming the special tokens and
        holding the chat template) into ``directory``."""
        directory = pathlib.Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        self._tok.save(str(directory / "tokenizer.json"))
        _write_config(
            directory,
            bos=None if self._bos_id is None else self._tok.id_to_token(self._bos_id),
            eos=None if self._eos_id is None else self._tok.id_to_token(self._eos_id),
            add_bos=self._add_bos,
            chat_template=self.chat_template,
            special_tokens=self.special_tokens,
        )

    def __repr__(self) -> str:
        return f"HFTokenizer(vocab_size={self.vocab_size}, bos_id={self._bos_id}, eos_id={self._eos_id})"


def _byte_alphabet() -> list[str]:
    # GPT-2's printable stand-ins for the 256 bytes (what the ByteLevel pre-tokenizer emits).
    keep = [*range(33, 127), *range(161, 173), *range(174, 256)]
    chars, extra = {}, 0
    for b in range(256):
        if b in keep:
            chars[b] = chr(b)
        else:
            chars[b] = chr(256 + extra)
            extra += 1
    return [chars[b] for b in range(256)]


def _write_config(
    directory: pathlib.Path,
    *,
    bos: str | None,
    eos: str | None,
    add_bos: bool,
    chat_template: str | None = None,
    special_tokens: Mapping[str, str] | None = None,
) -> None:
    """``tokenizer_config.json`` as ``transformers`` reads it (a fast tokenizer of this file)."""
    config: dict[str, object] = {"tokenizer_class": "PreTrainedTokenizerFast"}
    config.update(special_tokens or {})
    if bos is not None:
        config["bos_token"] = bos
    if eos is not None:
        config["eos_token"] = eos
    config["add_bos_token"] = add_bos
    if chat_template is not None:
        config["chat_template"] = chat_template
    (directory / "tokenizer_config.json").write_text(json.dumps(config, indent=2) + "\n")


def _token_content(value: object) -> str | None:
    # tokenizer_config.json stores specials as a string or as {"content": ..., ...}.
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("content"), str):
        return value["content"]
    return None


def load_tokenizer(path: str | pathlib.Path) -> ZooTokenizer:
    """The tokenizer of a local checkpoint directory (or a ``tokenizer.json`` file, read with
    the configuration files beside it, as the directory would be).

    Uses ``tokenizer.json`` when present (BOS/EOS from ``tokenizer_config.json`` if it names
    them; the chat template from ``chat_template.jinja`` or ``tokenizer_config.json``), else
    the built-in :class:`ByteTokenizer`.
    Whether a text starts with BOS is what the ``tokenizer.json`` post-processor does:
    ``transformers`` (5.x) ignores ``add_bos_token`` of ``tokenizer_config.json`` when a
    ``tokenizer.json`` exists, and encoding as it does is what keeps training, evaluation and
    greedy generation equal to it.
    """
    path = pathlib.Path(path)
    if not path.exists():
        raise ValueError(f"Tokenizer path {str(path)!r} does not exist; pass a local directory.")
    # A file alone would lose BOS, EOS and the chat template, which runs copy from beside it.
    file, path = (path, path.parent) if path.is_file() else (path / "tokenizer.json", path)
    if not file.is_file():
        return ByteTokenizer()
    config: dict[str, object] = {}
    config_file = path / "tokenizer_config.json"
    if config_file.is_file():
        config = _read_config(config_file)
    bos = _token_content(config.get("bos_token"))
    eos = _token_content(config.get("eos_token"))
    tok = _read_tokenizer(file)
    # A config naming a token the vocabulary lacks is not worth failing the load over.
    bos = bos if bos is not None and tok.token_to_id(bos) is not None else None
    eos = eos if eos is not None and tok.token_to_id(eos) is not None else None
    template, origin = _chat_template(path, config)
    return HFTokenizer(
        tok,
        bos_token=bos,
        eos_token=eos,
        chat_template=template,
        special_tokens=_special_tokens(config),
        chat_template_origin=origin,
    )


def _first_line(error: BaseException) -> str:
    return (str(error).splitlines() or [type(error).__name__])[0]


def _read_tokenizer(file: pathlib.Path) -> tokenizers.Tokenizer:
    try:
        return tokenizers.Tokenizer.from_file(str(file))
    except Exception as e:  # tokenizers raises a bare Exception for every failure
        raise ValueError(
            f"{file} is not a readable tokenizer.json ({_first_line(e)}); replace it with the "
            "model's own."
        ) from None


def _read_config(file: pathlib.Path) -> dict[str, object]:
    try:
        config = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:  # JSONDecodeError and UnicodeDecodeError included
        raise ValueError(
            f"{file} is not readable JSON ({_first_line(e)}); fix it or remove it."
        ) from None
    if not isinstance(config, dict):
        raise ValueError(
            f"{file} holds a JSON {type(config).__name__}, not an object of settings; fix it or "
            "remove it."
        )
    return config


CHAT_TEMPLATE_FILE = "chat_template.jinja"
# The special tokens transformers names (its `SPECIAL_TOKENS_ATTRIBUTES`).
_NAMED_SPECIALS = (
    "bos_token",
    "eos_token",
    "unk_token",
    "sep_token",
    "pad_token",
    "cls_token",
    "mask_token",
)


def _special_tokens(config: Mapping[str, object]) -> dict[str, str]:
    """The special tokens a chat template sees by name, as ``transformers`` 5 collects them
    from ``tokenizer_config.json``: the standard ones, a dict of ``extra_special_tokens`` and
    any other string-valued ``*_token`` key (model-specific tokens such as ``image_token``)."""
    out: dict[str, str] = {}
    extra = config.get("extra_special_tokens")
    named = dict(extra) if isinstance(extra, dict) else {}
    for key, value in config.items():
        if key in _NAMED_SPECIALS or (key.endswith("_token") and key not in named):
            named.setdefault(key, value)
    for key, value in named.items():
        content = _token_content(value)
        if content is not None:
            out[key] = content
    return out


@functools.lru_cache(maxsize=16)
def _compiled(source: str, origin: str, variables: tuple[tuple[str, str], ...]) -> ChatTemplate:
    return ChatTemplate(source, origin=origin, variables=dict(variables))


def _chat_template(
    directory: pathlib.Path, config: dict[str, object]
) -> tuple[str | None, str | None]:
    """The default chat template and the file it came from, found where ``transformers`` looks:
    ``chat_template.jinja`` (what ``save_pretrained`` writes now; it wins), else
    ``chat_template`` of ``tokenizer_config.json``, a string or a list of named templates."""
    file = directory / CHAT_TEMPLATE_FILE
    if file.is_file():
        try:
            return file.read_text(encoding="utf-8"), str(file)
        except (OSError, UnicodeDecodeError) as e:
            raise ValueError(
                f"{file} is not a readable UTF-8 template ({_first_line(e)}); fix it or remove it."
            ) from None
    template = config.get("chat_template")
    if isinstance(template, list):
        named = {t.get("name"): t.get("template") for t in template if isinstance(t, dict)}
        template = named.get("default")
    if not isinstance(template, str):
        return None, None
    return template, str(directory / "tokenizer_config.json")
