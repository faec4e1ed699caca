"""The settings machinery: every key, its type, default and help, read off the dataclasses.

A settings class is a frozen dataclass whose fields are made with :func:`setting` (a value),
:func:`section` (a nested settings class, a TOML table such as ``[optimizer]``) or :func:`table`
(a free table of names to values, such as ``[model_config]``). Their dotted keys
(``optimizer.warmup_steps``) are what config files, ``--set KEY=VALUE`` and the command-line flags
name; the type of each comes from its annotation (a ``Literal`` of strings gives its choices).
A value is checked against its declaration by :func:`check` when a settings class is built
(``ValueError``) and by :func:`coerce` when a setting is read (``UsageError``), in the same
words.

Whether a setting is part of the run's identity (what makes a resumed or repeated run the same
run) is an attribute of its declaration, read by one rule (:func:`declared_identity`): the
checkpoints' identity of a ``TrainConfig``, what a longer run may change, and whether a finished
run is asked for nothing new all follow from it. Nothing here knows a particular setting.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import reprlib
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

from .._usage import UsageError
from ._intervals import Range


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
    within: str | None = None,
    later: bool = False,
    identity: bool | Literal["schedule"] = True,
    top: bool = False,
    hidden: bool = False,
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
        within: the interval a number must lie in, e.g. ``"[0, 1)"`` (see :class:`Range`).
        later: added after runs were first recorded: :func:`flat` leaves it out while it holds
            ``default``, so a run recorded before it compares as the same run.
        identity: whether a different value makes a different run: ``True``; ``False`` for how
            a run is shown, saved, tracked or laid out; ``"schedule"`` for the total of steps and
            what follows from it, which a longer run of the same identity changes.
        top: inside a section, its key stands at the top level all the same (the optimizer's
            peak learning rate is ``lr``, not ``optimizer.lr``).
        hidden: a field of the library's that the command line sets from another setting
            (GRPO's ``beta`` comes from ``--beta``): no key, flag or record of its own.
    """
    metadata = {
        "help": help,
        "key": key,
        "flag": flag,
        "metavar": metavar,
        "nargs": nargs,
        "switch": switch,
        "flag_help": flag_help,
        "within": None if within is None else Range.parse(within),
        "later": later,
        "identity": identity,
        "top": top,
        "hidden": hidden,
    }
    if isinstance(default, list | dict):
        return dataclasses.field(default_factory=lambda: copy.deepcopy(default), metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def declared(cls: type, name: str) -> Any:
    """The field ``name`` of the settings class ``cls``, as it is declared there (default, help,
    range, flag), for a class that holds the same setting in another place (the command line's
    top-level ``lr`` is the optimizer's peak learning rate).

    Raises:
        KeyError: ``cls`` has no such field (a rename there is an error here, at import).
    """
    field = {f.name: f for f in dataclasses.fields(cls)}[name]
    if field.default_factory is not dataclasses.MISSING:
        return dataclasses.field(default_factory=field.default_factory, metadata=field.metadata)
    return dataclasses.field(default=field.default, metadata=field.metadata)


def section(cls: type, *, identity: bool = True, default: Callable[[], Any] | None = None) -> Any:
    """A field holding a nested settings class (a table in a config file); ``identity=False``:
    none of its settings is part of the run's identity; ``default`` makes its default
    (``cls()``)."""
    return dataclasses.field(
        default_factory=default or cls, metadata={"section": True, "identity": identity}
    )


def table(help: str, *, identity: bool = True) -> Any:
    """A field holding a free table: names to values, checked by whoever uses them
    (``identity`` as for :func:`setting`)."""
    return dataclasses.field(
        default_factory=dict, metadata={"table": True, "help": help, "identity": identity}
    )


@dataclasses.dataclass(frozen=True)
class Key:
    """One setting as the outside names it.

    Attributes:
        name: the dotted key (``optimizer.warmup_steps``).
        path: the attribute path (``("optimizer", "warmup_steps")``).
        kind: ``int``, ``float``, ``str``, ``bool`` or ``list``; ``?`` appended when it may be
            ``None``.
        default: its default in the class it was read from.
        help, flag, metavar, nargs, switch, flag_help, within, later: see :func:`setting`.
        choices: the values a string may take (from a ``Literal`` annotation), or ``None``.
        identity: whether it is part of the run's identity (:func:`declared_identity`).
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
    within: Range | None = None
    later: bool = False
    choices: tuple[str, ...] | None = None
    identity: bool | str = True


def _optional(annotation: Any) -> tuple[Any, bool]:
    """``annotation`` without ``| None``, and whether it had it."""
    args = typing.get_args(annotation)
    if typing.get_origin(annotation) in (typing.Union, types.UnionType) and type(None) in args:
        (inner,) = [a for a in args if a is not type(None)]
        return inner, True
    return annotation, False


def _kind(annotation: Any) -> str:
    annotation, optional = _optional(annotation)
    base = typing.get_origin(annotation) or annotation
    if base is list and typing.get_args(annotation) == (float,):
        return "floats" + ("?" if optional else "")
    if base is tuple:  # (start, end): a window of steps, written START:END
        return "window" + ("?" if optional else "")
    if base is Literal:
        return "str" + ("?" if optional else "")
    name = {int: "int", float: "float", str: "str", bool: "bool", list: "list"}[base]
    return name + ("?" if optional else "")


def _choices(annotation: Any) -> tuple[str, ...] | None:
    annotation, _ = _optional(annotation)
    return typing.get_args(annotation) if typing.get_origin(annotation) is Literal else None


def keys(settings: Any) -> dict[str, Key]:
    """Every setting of a settings instance, by dotted key, with its current value as default."""
    out: dict[str, Key] = {}
    hints = typing.get_type_hints(type(settings))
    for f in dataclasses.fields(settings):
        value = getattr(settings, f.name)
        if f.metadata.get("table") or f.metadata.get("hidden"):
            continue
        if f.metadata.get("section"):
            inner_hints = typing.get_type_hints(type(value))
            for g in dataclasses.fields(value):
                meta = g.metadata
                if meta.get("hidden"):
                    continue
                name = meta.get("key") or g.name
                name = name if meta.get("top") else f"{f.name}.{name}"
                identity = False if f.metadata.get("identity") is False else None
                out[name] = Key(
                    name=name,
                    path=(f.name, g.name),
                    kind=_kind(inner_hints[g.name]),
                    default=getattr(value, g.name),
                    choices=_choices(inner_hints[g.name]),
                    **_flag_metadata(meta, identity),
                )
            continue
        name = f.metadata.get("key") or f.name
        out[name] = Key(
            name=name,
            path=(f.name,),
            kind=_kind(hints[f.name]),
            default=value,
            choices=_choices(hints[f.name]),
            **_flag_metadata(f.metadata),
        )
    return out


def _flag_metadata(meta: Mapping[str, Any], identity: bool | None = None) -> dict[str, Any]:
    fields = ("help", "flag", "metavar", "nargs", "switch", "flag_help", "within", "later")
    out = {k: meta.get(k) for k in fields if meta.get(k) is not None or k == "help"}
    out["identity"] = meta.get("identity", True) if identity is None else identity
    return out


def tables(settings: Any) -> tuple[str, ...]:
    """The names of the free tables (``model_config``, ``sharding``)."""
    return tuple(f.name for f in dataclasses.fields(settings) if f.metadata.get("table"))


def sections(settings: Any) -> tuple[str, ...]:
    """The names of the nested sections (``optimizer``, ``mesh``, ...)."""
    return tuple(f.name for f in dataclasses.fields(settings) if f.metadata.get("section"))


def shown(value: Any) -> str:
    """``repr(value)`` cut to a few levels, items and characters: what an error echoes of a
    value, however large (a YAML alias can make a small file a huge value)."""
    short = reprlib.Repr()
    short.maxlevel, short.maxlist, short.maxtuple, short.maxdict = 3, 4, 4, 4
    short.maxstring = short.maxother = 60
    text = short.repr(value)
    return text if len(text) <= 120 else text[:119] + "…"


def _type_error(key: str, kind: str, value: Any) -> UsageError:
    want = {
        "int": "an integer",
        "float": "a number",
        "str": "a string",
        "bool": "true or false",
        "list": "a list of strings",
        "floats": "a list of numbers",
        "window": "START:END, two step numbers such as 10:15",
    }[kind.rstrip("?")]
    return UsageError(f"Setting `{key}` must be {want}, got {shown(value)}.")


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
    elif base == "floats":
        if isinstance(value, int | float) and not isinstance(value, bool):
            value = [value]
        if not isinstance(value, list | tuple) or not all(
            isinstance(v, int | float) and not isinstance(v, bool) for v in value
        ):
            raise _type_error(key.name, key.kind, value)
        value = [float(v) for v in value]
        if not all(math.isfinite(v) for v in value):
            raise UsageError(f"Setting `{key.name}` must hold finite numbers, got {shown(value)}.")
    elif base == "window":
        try:
            value = parse_window(value)
        except ValueError:
            raise _type_error(key.name, key.kind, value) from None
    flag = f" ({key.flag})" if key.flag and not key.switch else ""
    for item in value if base == "floats" else [value]:
        problem = refusal(f"Setting `{key.name}`{flag}", item, key.within, key.choices)
        if problem is not None and base == "floats":
            problem = problem.replace(" must be ", " must hold numbers ", 1)
        if problem is not None:
            raise UsageError(problem)
    return value


def refusal(
    label: str, value: Any, within: Range | None, choices: tuple[str, ...] | None
) -> str | None:
    """The sentence refusing ``value`` for the setting ``label`` names (```steps```), or
    ``None`` when ``value`` lies within its range and choices: the library's configs and the
    command line refuse a value in these words."""
    if choices is not None and value not in choices:
        allowed = ", ".join(repr(c) for c in choices[:-1]) + f" or {choices[-1]!r}"
        return f"{label} must be {allowed}, got {shown(value)}."
    if within is not None and value not in within:
        return f"{label} must be {within.describe()}, got {shown(value)}."
    return None


_Declared = tuple[tuple[str, bool, Range | None, tuple[str, ...] | None], ...]
_DECLARED: dict[type, _Declared] = {}  # by class: read once, checked at every instance


def _declared(cls: type) -> _Declared:
    """``(name, may be None, range, choices)`` of each field of ``cls`` that has either."""
    if cls not in _DECLARED:
        hints = typing.get_type_hints(cls)
        _DECLARED[cls] = tuple(
            (f.name, _optional(hints[f.name])[1], f.metadata.get("within"), _choices(hints[f.name]))
            for f in dataclasses.fields(cls)
            if f.metadata.get("within") is not None or _choices(hints[f.name]) is not None
        )
    return _DECLARED[cls]


def check(settings: Any, prefix: str = "") -> None:
    """Refuse a settings instance whose fields lie outside their declared ranges and choices
    (``prefix``: the section's, ``optimizer.``, so a message names the key as a file would).

    Raises:
        ValueError: naming the first such field, in the words :func:`coerce` uses.
    """
    for name, optional, within, choices in _declared(type(settings)):
        value = getattr(settings, name)
        if value is None and optional:
            continue
        for item in value if isinstance(value, list) else [value]:
            problem = refusal(f"`{prefix}{name}`", item, within, choices)
            if problem is not None:
                raise ValueError(problem)


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
    if base == "floats":
        try:
            return [float(part) for part in text.split(",") if part.strip()]
        except ValueError:
            raise _type_error(key.name, base, text) from None
    return text  # a window is read by coerce, from text or a file's value alike


def parse_window(value: Any) -> tuple[int, int]:
    """A window of steps, ``(start, end)`` with ``1 <= start <= end``, from the text
    ``"START:END"`` or a pair of integers.

    Raises:
        ValueError: not two integers in order.
    """
    parts = value.split(":") if isinstance(value, str) else value
    try:
        if any(isinstance(p, bool | float) for p in parts):
            raise ValueError
        start, end = (int(p) for p in parts)
    except (TypeError, ValueError):
        raise ValueError(
            f"profile must be START:END, two step numbers such as 10:15, got {value!r}."
        ) from None
    if not 1 <= start <= end:
        raise ValueError(f"profile must be START:END with 1 <= START <= END, got {value!r}.")
    return start, end


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
    processes of a run compare to agree they run the same thing). A setting added later is
    left out while it holds its default, as runs recorded before it have it."""
    out = {
        name: key.default
        for name, key in keys(settings).items()
        if not (key.later and key.default == _declared_default(type(settings), key.path))
    }
    for name in tables(settings):
        out.update({f"{name}.{k}": v for k, v in getattr(settings, name).items()})
    return out


def declared_identity(cls: type, path: Sequence[str]) -> bool | str:
    """Whether the setting at the attribute ``path`` of the settings class ``cls`` is part of
    the run's identity: ``True``, ``False`` or ``"schedule"`` (see :func:`setting`). A setting of
    a section or table that is not in the identity is not either; a path ``cls`` does not
    declare (a record of other settings) is compared, as a change it cannot place."""
    field = {f.name: f for f in dataclasses.fields(cls)}.get(path[0])
    if field is None:
        return True
    mark: bool | str = field.metadata.get("identity", True)
    if mark is False or len(path) == 1:
        return mark
    inner = typing.get_type_hints(cls)[path[0]]
    if isinstance(inner, type) and dataclasses.is_dataclass(inner):  # a section
        return declared_identity(inner, path[1:])
    return mark


def compared(settings: Any, values: Mapping[str, Any]) -> dict[str, Any]:
    """The entries of a record of settings by dotted key (:func:`flat`'s) that are part of the
    run's identity by the declarations of ``settings``' class."""
    known = keys(settings)
    free_tables = [
        f"{name}."
        for name in tables(settings)
        if declared_identity(type(settings), (name,)) is False
    ]

    def kept(name: str) -> bool:
        if name in known:
            return known[name].identity is not False
        return not name.startswith(tuple(free_tables))

    return {k: v for k, v in values.items() if kept(k)}


def _declared_default(cls: type, path: tuple[str, ...]) -> Any:
    """The default a settings class declares for the field at ``path``."""
    if len(path) > 1:  # a section: its own class declares the rest
        return _declared_default(typing.get_type_hints(cls)[path[0]], path[1:])
    field = {f.name: f for f in dataclasses.fields(cls)}[path[0]]
    return field.default_factory() if callable(field.default_factory) else field.default
