"""Settings from their sources: defaults < config file < ``--set KEY=VALUE`` < flags.

A config file (TOML, YAML or JSON) holds top-level keys named like the command-line flags
(``steps``, ``batch_size``, ``lr``, ...) and the tables ``[optimizer]``, ``[attention]``,
``[lora]``, ``[mesh]`` (``data``, ``fsdp``, ``tensor``), ``[sharding]`` (logical axis name →
mesh axes, changing zoo-train's sharding rules) and ``[model_config]`` (fields of
``zoo_models.ModelConfig`` to change on the preset). ``--set KEY=VALUE`` reaches any setting by
its dotted key. Unknown keys and badly typed values are a :class:`UsageError`.
"""

from __future__ import annotations

import difflib
import json
import pathlib
import tomllib
from collections.abc import Callable, Hashable, Mapping
from typing import Any

from .._usage import UsageError
from ._fields import Key, coerce, keys, replace, sections, shown, tables
from ._mesh_config import MeshConfig
from ._run_settings import FinetuneSettings, RunSettings, finetune_defaults


def defaults(command: str) -> RunSettings:
    """The settings of ``command`` (``train``, ``finetune`` or ``compile``) before any source.
    ``compile`` takes those of ``train`` and the fine-tuning ones (LoRA, the objective,
    ``--from-hf``), at their defaults: it compiles the step either command takes."""
    if command == "finetune":
        return finetune_defaults()
    return FinetuneSettings() if command == "compile" else RunSettings()


def unknown_key(key: str, known: Mapping[str, Key]) -> UsageError:
    """The error for a setting that does not exist (with the closest known name)."""
    key = str(key)  # a YAML key may be a number
    close = (
        difflib.get_close_matches(
            key, [*known, "model_config.<field>", "sharding.<logical axis>"], n=1
        )
        if len(key) <= 100
        else []
    )
    hint = f" (did you mean `{close[0]}`?)" if close else ""
    name = key if len(key) <= 80 else key[:79] + "…"
    return UsageError(
        f"Unknown setting `{name}`{hint}; run `zoo train --help` or see the zoo-train README "
        "for the known settings."
    )


class _Sources:
    """The values gathered so far, by dotted key, and the free tables' entries."""

    def __init__(self, base: RunSettings) -> None:
        self.base = base
        self.known = keys(base)
        # Fine-tuning settings given to `zoo train` are refused, unless left at their defaults.
        self.finetune_only = {
            k: v for k, v in keys(finetune_defaults()).items() if k not in self.known
        }
        self.values: dict[tuple[str, ...], Any] = {}
        self.tables: dict[str, dict[str, Any]] = {name: {} for name in tables(base)}

    def set(self, name: str, value: Any, *, from_text: bool = False) -> None:
        key = self.known.get(name)
        if key is None:
            other = self.finetune_only.get(name)
            if other is None:
                raise unknown_key(name, self.known)
            if coerce(other, value, from_text=from_text) != other.default:
                raise UsageError(f"`{name}` is a fine-tuning setting; use `zoo finetune` for it.")
            return
        self.values[key.path] = coerce(key, value, from_text=from_text)

    def settings(self) -> RunSettings:
        try:  # the checks of the classes themselves (the mesh's axes), now rather than later
            s = replace(self.base, self.values)
        except ValueError as e:
            raise UsageError.from_error(e) from None
        changed = {name: {**getattr(s, name), **entries} for name, entries in self.tables.items()}
        return replace(s, {(name,): value for name, value in changed.items()})


#: How deep a config file's values may nest: settings are tables of values, lists of a table's
#: values a level or two more.
MAX_DEPTH = 16
#: How many values a config file may hold, each use of a YAML alias counted as what it expands to.
MAX_VALUES = 100_000


def _yaml_loader() -> Any:
    """PyYAML's safe loader, refusing a key given twice in one mapping (a merge key ``<<``
    may still override what it merges)."""
    import yaml

    class UniqueKeys(yaml.SafeLoader):
        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            if isinstance(node, yaml.MappingNode):
                seen: set[Any] = set()
                for key_node, _ in node.value:
                    if key_node.tag == "tag:yaml.org,2002:merge":
                        continue
                    key = self.construct_object(key_node, deep=True)
                    if isinstance(key, Hashable) and key in seen:
                        raise _DuplicateKeyError(key, key_node.start_mark.line + 1)
                    if isinstance(key, Hashable):
                        seen.add(key)
            return super().construct_mapping(node, deep=deep)

    return UniqueKeys


class _DuplicateKeyError(Exception):
    def __init__(self, key: Any, line: int | None = None) -> None:
        super().__init__(key, line)
        self.key, self.line = key, line


def _json_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKeyError(key)
        out[key] = value
    return out


def _check_size(data: Any, path: str) -> None:
    """Refuse values nested deeper than :data:`MAX_DEPTH` or more than :data:`MAX_VALUES` of
    them (walked without recursion, each alias as often as it is used, stopping at the cap)."""
    stack: list[tuple[Any, int]] = [(data, 1)]
    count = 0
    while stack:
        value, depth = stack.pop()
        count += 1
        if count > MAX_VALUES:
            raise UsageError(
                f"The config file {path!r} holds more than {MAX_VALUES:,} values (YAML aliases "
                "count each time they are used); write its settings out plainly."
            )
        if depth > MAX_DEPTH:
            raise UsageError(
                f"The config file {path!r} nests values more than {MAX_DEPTH} levels deep; "
                "settings are tables of values, a level or two deep."
            )
        children = value.values() if isinstance(value, dict) else value
        if isinstance(value, dict | list):
            stack.extend((child, depth + 1) for child in children)


def read_config_file(path: str | pathlib.Path) -> dict[str, Any]:
    """A TOML (``.toml``), YAML (``.yaml``, ``.yml``: the tables as mappings, as MaxText and
    Levanter configs are written) or JSON (``.json``) config file as a table of settings.

    Raises:
        UsageError: a missing, unreadable or invalid file, a key given twice in one table,
            values nested deeper than :data:`MAX_DEPTH` or more than :data:`MAX_VALUES` of
            them (a YAML alias bomb).
    """
    import yaml

    path = pathlib.Path(path)
    if not path.is_file():
        raise UsageError(f"The config file {str(path)!r} does not exist; pass an existing file.")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise UsageError(
            f"The config file {str(path)!r} is not UTF-8 text ({e.reason} at byte {e.start}); "
            "save it as UTF-8."
        ) from None
    readers: dict[str, Callable[[str], Any]] = {
        ".json": lambda t: json.loads(t, object_pairs_hook=_json_object),
        ".toml": tomllib.loads,  # a key given twice is TOML's own error
        ".yaml": lambda t: yaml.load(t, Loader=_yaml_loader()),
        ".yml": lambda t: yaml.load(t, Loader=_yaml_loader()),
    }
    read = readers.get(path.suffix.lower())
    if read is None:
        raise UsageError(f"The config file {str(path)!r} must end in .toml, .yaml, .yml or .json.")
    try:
        data = read(text)
    except _DuplicateKeyError as e:
        where = f" (line {e.line})" if e.line else ""
        key = e.key if isinstance(e.key, str) and len(e.key) <= 80 else shown(e.key)
        raise UsageError(
            f"The config file {str(path)!r} gives `{key}` twice in one table{where}; keep one."
        ) from None
    except (json.JSONDecodeError, tomllib.TOMLDecodeError, yaml.YAMLError) as e:
        first = " ".join(str(e).split())[:300] if str(e) else type(e).__name__
        raise UsageError(f"The config file {str(path)!r} is not valid ({first}); fix it.") from None
    except RecursionError:
        raise UsageError(
            f"The config file {str(path)!r} nests values more than {MAX_DEPTH} levels deep; "
            "settings are tables of values, a level or two deep."
        ) from None
    if not isinstance(data, dict):
        raise UsageError(f"The config file {str(path)!r} must hold a table of settings.")
    _check_size(data, str(path))
    return data


def _read_file(sources: _Sources, data: Mapping[str, Any], source: str) -> None:
    for name, value in data.items():
        if name in sources.tables:
            if not isinstance(value, Mapping):
                what = "model fields" if name == "model_config" else "logical axis = mesh axes"
                raise UsageError(f"`{name}` in {source} must be a table of {what}.")
            sources.tables[name].update(value)
        elif name in _sections(sources) and isinstance(value, Mapping):
            for sub, v in value.items():
                sources.set(f"{name}.{sub}", v)
        elif name in _sections(sources):
            raise UsageError(f"`{name}` in {source} must be a table, e.g. [{name}].")
        else:
            sources.set(name, value)


def _sections(sources: _Sources) -> tuple[str, ...]:
    return (*sections(sources.base), *(k.split(".")[0] for k in sources.finetune_only if "." in k))


def parse_assignment(text: str) -> tuple[str, str]:
    """``"KEY=VALUE"`` → ``(KEY, VALUE)`` (a ``--set`` argument)."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise UsageError(
            f"--set takes KEY=VALUE, got {text!r}; e.g. --set optimizer.warmup_steps=20."
        )
    return key.strip(), value


def _table_value(table: str, raw: str) -> Any:
    if table == "sharding":  # `--set sharding.embed=fsdp`, `=data,fsdp` or `=none`
        text = raw.strip()
        if text.lower() in ("", "none", "null"):
            return None
        parts = [p.strip() for p in text.split(",") if p.strip()]
        return parts[0] if len(parts) == 1 else parts
    # Model fields have many types; read the text as JSON when it parses (numbers, true, null).
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        return raw


def parse_mesh(text: str) -> dict[str, int]:
    """``--mesh data=1,fsdp=-1,tensor=1`` as axis sizes (axes left out: defaults)."""
    try:
        return MeshConfig.parse(text).to_dict()
    except ValueError as e:
        raise UsageError.from_error(e) from None


def resolve_settings(
    *,
    command: str,
    config_file: str | None,
    assignments: list[str],
    flags: Mapping[str, Any],
) -> RunSettings:
    """Merge defaults, the config file, ``--set`` assignments and explicit flags (in that order).

    Args:
        command: ``"train"``, ``"finetune"`` or ``"compile"`` (fine-tuning settings are refused
            for ``train``).
        config_file: a TOML/JSON path, or ``None``.
        assignments: ``--set KEY=VALUE`` texts.
        flags: dotted key → value for the flags given on the command line (already typed);
            ``mesh`` takes the text of ``--mesh``.

    Returns:
        A :class:`RunSettings` (a :class:`FinetuneSettings` for ``finetune``).
    """
    sources = _Sources(defaults(command))
    if config_file is not None:
        _read_file(sources, read_config_file(config_file), str(config_file))
    for text in assignments:
        key, raw = parse_assignment(text)
        table, dot, entry = key.partition(".")
        if dot and table in sources.tables:
            sources.tables[table][entry] = _table_value(table, raw)
        else:
            sources.set(key, raw, from_text=True)
    for key, value in flags.items():
        if key == "mesh":
            for axis, size in parse_mesh(value).items():
                sources.set(f"mesh.{axis}", size)
        else:
            sources.set(key, value)
    return sources.settings()
