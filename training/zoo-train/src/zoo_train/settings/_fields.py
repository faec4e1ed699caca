"""The settings machinery: every key, its type, default and help, read off the dataclasses.

A settings class is a frozen dataclass whose fields are made with :func:`setting` (a value),
:func:`section` (a nested settings class, a TOML table such as ``[optimizer]``) or :func:`table`
(a free table of names to values, such as ``[model_config]``). Their dotted keys
(``optimizer.warmup_steps``) are what config files, ``--set KEY=VALUE`` and the command-line flags
name; the type of each comes from its annotation. Nothing here knows a particular setting.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import types
import typing
from collections.abc import Mapping
from typing import Any

from .._usage import UsageError


def setting(
    default: Any,
    help: str,
    *,
    key: str | None = None,
    flag: str | None = None,
    metavar: str | None = None,
    nargs: str | None = None,
    switch: bool | None = None,
    flag_help: str | None = None,
) -> Any:
    """A field holding one setting.

    Args:
        default: its value when nothing sets it (lists are copied per instance).
        help: one line for ``--help`` and the README.
        key: its name in files and ``--set`` when not the attribute's (``save_every``).
        flag: its command-line flag (``--batch-size``), if it has one.
        metavar, nargs: for the flag.
        switch: the flag takes no value and sets the setting to this.
        flag_help: the flag's help, when it must say more than ``help``.
    """
    metadata = {
        "help": help,
        "key": key,
        "flag": flag,
        "metavar": metavar,
        "nargs": nargs,
        "switch": switch,
        "flag_help": flag_help,
    }
    if isinstance(default, list | dict):
        return dataclasses.field(default_factory=lambda: copy.deepcopy(default), metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def section(cls: type) -> Any:
    """A field holding a nested settings class (a table in a config file)."""
    return dataclasses.field(default_factory=cls, metadata={"section": True})


def table(help: str) -> Any:
    """A field holding a free table: names to values, checked by whoever uses them."""
    return dataclasses.field(default_factory=dict, metadata={"table": True, "help": help})


@dataclasses.dataclass(frozen=True)
class Key:
    """One setting as the outside names it.

    Attributes:
        name: the dotted key (``optimizer.warmup_steps``).
        path: the attribute path (``("optimizer", "warmup_steps")``).
        kind: ``int``, ``float``, ``str``, ``bool`` or ``list``; ``?`` appended when it may be
            ``None``.
        default: its default in the class it was read from.
        help, flag, metavar, nargs, switch, flag_help: see :func:`setting`.
    """

    name: str
    path: tuple[str, ...]
    kind: str
    default: Any
    help: str
    flag: str | None = None
    metavar: str | None = None
    nargs: str | None = None
    switch: bool | None = None
    flag_help: str | None = None


def _kind(annotation: Any) -> str:
    args = typing.get_args(annotation)
    optional = (
        typing.get_origin(annotation) in (typing.Union, types.UnionType) and type(None) in args
    )
    if optional:
        (annotation,) = [a for a in args if a is not type(None)]
    base = typing.get_origin(annotation) or annotation
    name = {int: "int", float: "float", str: "str", bool: "bool", list: "list"}[base]
    return name + ("?" if optional else "")


def keys(settings: Any) -> dict[str, Key]:
    """Every setting of a settings instance, by dotted key, with its current value as default."""
    out: dict[str, Key] = {}
    hints = typing.get_type_hints(type(settings))
    for f in dataclasses.fields(settings):
        value = getattr(settings, f.name)
        if f.metadata.get("table"):
            continue
        if f.metadata.get("section"):
            inner_hints = typing.get_type_hints(type(value))
            for g in dataclasses.fields(value):
                meta = g.metadata
                name = f"{f.name}.{meta.get('key') or g.name}"
                out[name] = Key(
                    name=name,
                    path=(f.name, g.name),
                    kind=_kind(inner_hints[g.name]),
                    default=getattr(value, g.name),
                    **_flag_metadata(meta),
                )
            continue
        name = f.metadata.get("key") or f.name
        out[name] = Key(
            name=name,
            path=(f.name,),
            kind=_kind(hints[f.name]),
            default=value,
            **_flag_metadata(f.metadata),
        )
    return out


def _flag_metadata(meta: Mapping[str, Any]) -> dict[str, Any]:
    fields = ("help", "flag", "metavar", "nargs", "switch", "flag_help")
    return {k: meta.get(k) for k in fields if meta.get(k) is not None or k == "help"}


def tables(settings: Any) -> tuple[str, ...]:
    """The names of the free tables (``model_config``, ``sharding``)."""
    return tuple(f.name for f in dataclasses.fields(settings) if f.metadata.get("table"))


def sections(settings: Any) -> tuple[str, ...]:
    """The names of the nested sections (``optimizer``, ``mesh``, ...)."""
    return tuple(f.name for f in dataclasses.fields(settings) if f.metadata.get("section"))


def _type_error(key: str, kind: str, value: Any) -> UsageError:
    want = {
        "int": "an integer",
        "float": "a number",
        "str": "a string",
        "bool": "true or false",
        "list": "a list of strings",
    }[kind.rstrip("?")]
    return UsageError(f"Setting `{key}` must be {want}, got {value!r}.")


def coerce(key: Key, value: Any, *, from_text: bool = False) -> Any:
    """``value`` checked against ``key``'s type (command-line text parsed first)."""
    base = key.kind.rstrip("?")
    if key.kind.endswith("?") and (
        value is None or (from_text and value.lower() in ("none", "null"))
    ):
        return None
    if from_text:
        value = _parse_text(key, base, value)
    if base == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            raise _type_error(key.name, key.kind, value)
    elif base == "float":
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise _type_error(key.name, key.kind, value)
        value = float(value)
        if not math.isfinite(value):
            raise UsageError(f"Setting `{key.name}` must be a finite number, got {value}.")
    elif base == "str":
        if not isinstance(value, str):
            raise _type_error(key.name, key.kind, value)
    elif base == "bool":
        if not isinstance(value, bool):
            raise _type_error(key.name, key.kind, value)
    elif base == "list":
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
            raise _type_error(key.name, key.kind, value)
        value = list(value)
    return value


def _parse_text(key: Key, base: str, text: str) -> Any:
    try:
        if base == "int":
            return int(text)
        if base == "float":
            return float(text)
    except ValueError:
        raise _type_error(key.name, base, text) from None
    if base == "bool":
        low = text.lower()
        if low in ("true", "1", "yes", "on"):
            return True
        if low in ("false", "0", "no", "off"):
            return False
        raise _type_error(key.name, base, text)
    if base == "list":
        return [part.strip() for part in text.split(",") if part.strip()]
    return text


def replace(settings: Any, values: Mapping[tuple[str, ...], Any]) -> Any:
    """``settings`` with the values at the given attribute paths changed (one or two deep)."""
    top: dict[str, Any] = {}
    nested: dict[str, dict[str, Any]] = {}
    for path, value in values.items():
        if len(path) == 1:
            top[path[0]] = value
        else:
            nested.setdefault(path[0], {})[path[1]] = value
    for name, changes in nested.items():
        top[name] = dataclasses.replace(getattr(settings, name), **changes)
    return dataclasses.replace(settings, **top)


def flat(settings: Any) -> dict[str, Any]:
    """Every setting by dotted key, the free tables' entries as ``table.name`` (what the
    processes of a run compare to agree they run the same thing)."""
    out = {name: _at(settings, key.path) for name, key in keys(settings).items()}
    for name in tables(settings):
        out.update({f"{name}.{k}": v for k, v in getattr(settings, name).items()})
    return out


def _at(settings: Any, path: tuple[str, ...]) -> Any:
    for part in path:
        settings = getattr(settings, part)
    return settings
