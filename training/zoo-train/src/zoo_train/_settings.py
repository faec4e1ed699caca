"""Run settings of ``zoo train`` / ``zoo finetune``: defaults < config file < command line.

A config file (TOML or JSON) holds top-level keys named like the command-line flags
(``steps``, ``batch_size``, ``lr``, ...) and the tables ``[optimizer]``, ``[attention]``,
``[lora]``, ``[mesh]`` (``data``, ``fsdp``, ``tensor``), ``[sharding]`` (logical axis name →
mesh axes, changing zoo-train's sharding rules) and ``[model_config]`` (fields of
``zoo_models.ModelConfig`` to change on the preset).
Internally every setting is a dotted key (``optimizer.warmup_steps``); ``--set KEY=VALUE`` on the
command line reaches any of them. Unknown keys and badly typed values are a :class:`UsageError`.
"""

from __future__ import annotations

import dataclasses
import json
import pathlib
import tomllib
from collections.abc import Mapping
from typing import Any

from ._usage import UsageError


@dataclasses.dataclass(frozen=True)
class Key:
    """One setting: its type (``int``, ``float``, ``str``, ``bool``, ``list``; ``?`` = may be
    ``None``), default and help text."""

    kind: str
    default: Any
    help: str
    finetune_only: bool = False


# The schema. Defaults are those of `zoo train` with no arguments (the `make train` job).
SCHEMA: dict[str, Key] = {
    "model": Key("str", "llama-tiny", "model preset (see `zoo models`)"),
    "data": Key("list", [], "text files, directories, globs or .jsonl; empty = the stdlib corpus"),
    "eval_data": Key("list", [], "held-out data evaluated instead of a split of `data`"),
    "out": Key("str", "runs/default", "output directory (checkpoints, metrics, loss curve)"),
    "steps": Key("int", 800, "optimizer steps"),
    "batch_size": Key("int", 16, "rows per micro-batch"),
    "seq_len": Key("int", 128, "tokens per row"),
    "grad_accum": Key("int", 1, "micro-batches per step"),
    "stop_at": Key(
        "int?", None, "end this call after this step (resume later with the same settings)"
    ),
    "save_every": Key("int", 100, "steps between checkpoints (the last step is always saved)"),
    "lr": Key("float", 2e-3, "peak learning rate"),
    "eval_every": Key("int", 100, "steps between evaluations (0: only at the end)"),
    "eval_batches": Key("int?", 8, "cap on evaluation batches (none: the whole split)"),
    "log_every": Key("int", 10, "steps between metric records"),
    "keep": Key("int", 3, "checkpoints kept besides the best"),
    "seed": Key("int", 0, "seed of the model init, data order and split"),
    "val_fraction": Key("float", 0.05, "fraction of documents held out for evaluation"),
    "text_field": Key("str", "text", "the field of each .jsonl line that holds its text"),
    "max_bytes": Key("int", 3_000_000, "size of the stdlib corpus (when `data` is empty)"),
    "compute_dtype": Key("str", "auto", "auto, float32 or bfloat16"),
    "z_loss": Key("float", 0.0, "weight of the z-loss"),
    "progress": Key("bool", True, "show the progress bar"),
    "profile": Key(
        "str?", None, "trace steps START:END into OUT/profile (read: `zoo profile OUT`)"
    ),
    "sample_tokens": Key("int", 300, "tokens sampled at the end (0: none)"),
    "prompt": Key("str", "def ", "prompt of the final sample"),
    "temperature": Key("float", 0.8, "sampling temperature of the final sample"),
    "optimizer.name": Key("str", "adamw", "adamw, sgd or adafactor"),
    "optimizer.warmup_steps": Key(
        "int?", None, "linear warm-up steps (none: warmup_fraction of the run)"
    ),
    "optimizer.warmup_fraction": Key(
        "float",
        0.125,
        "warm-up as a fraction of the run when warmup_steps is none (at least 10 steps, at "
        "most half the run)",
    ),
    "optimizer.schedule": Key("str", "cosine", "cosine, linear or constant"),
    "optimizer.min_lr_ratio": Key("float", 0.1, "final lr as a fraction of lr"),
    "optimizer.weight_decay": Key("float", 0.1, "decoupled weight decay"),
    "optimizer.b1": Key("float", 0.9, "Adam b1"),
    "optimizer.b2": Key("float", 0.95, "Adam b2"),
    "optimizer.eps": Key("float", 1e-8, "Adam epsilon"),
    "optimizer.momentum": Key("float", 0.9, "SGD momentum"),
    "optimizer.clip_norm": Key("float?", 1.0, "global-norm clipping (none: off)"),
    "mesh.data": Key("int", 1, "data-parallel mesh axis size (-1: every device left over)"),
    "mesh.fsdp": Key("int", -1, "fully sharded data-parallel axis size (-1: every device left)"),
    "mesh.tensor": Key("int", 1, "tensor-parallel axis size (-1: every device left over)"),
    "attention.implementation": Key("str?", None, "attention kernel name (none: default order)"),
    "attention.require": Key("str?", None, "kernel version range, e.g. zoo-flash-tpu>=0.1,<0.2"),
    "from_hf": Key("str?", None, "fine-tune from a Hugging Face directory", True),
    "from_run": Key("str?", None, "fine-tune from a zoo run directory", True),
    "export_hf": Key("str?", None, "write the fine-tuned model here (Hugging Face format)", True),
    "overwrite": Key(
        "bool", False, "let --export-hf replace a non-empty directory or the source model", True
    ),
    "tokenizer": Key(
        "str?", None, "tokenizer directory or tokenizer.json (none: the model's own)", True
    ),
    "lora.rank": Key("int", 0, "LoRA rank (0: full fine-tuning)", True),
    "lora.alpha": Key("float", 16.0, "LoRA alpha (the update is scaled by alpha / rank)", True),
    "lora.targets": Key("list", [], "LoRA targets: q k v o gate up down (none: by family)", True),
    "lora.from": Key(
        "str?", None, "continue training this PEFT adapter directory (its rank and targets)", True
    ),
}

# `zoo finetune` starts from trained weights: a smaller learning rate, a short run.
FINETUNE_DEFAULTS: dict[str, Any] = {
    "out": "runs/finetune",
    "steps": 200,
    "lr": 1e-4,
    "save_every": 50,
    "eval_every": 50,
    "optimizer.warmup_fraction": 0.05,
    "sample_tokens": 0,
}

_SECTIONS = ("optimizer", "attention", "lora", "mesh")
MODEL_CONFIG = "model_config"
SHARDING = "sharding"
_FREE_TABLES = (MODEL_CONFIG, SHARDING)


@dataclasses.dataclass(frozen=True)
class Settings:
    """Resolved settings: ``values`` (every schema key), ``model_config`` (field changes) and
    ``sharding`` (changes to the sharding rules)."""

    values: dict[str, Any]
    model_config: dict[str, Any]
    sharding: dict[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def mesh_text(self) -> str:
        """The mesh as ``data=…,fsdp=…,tensor=…``."""
        return ",".join(f"{a}={self.values[f'mesh.{a}']}" for a in ("data", "fsdp", "tensor"))

    def __getitem__(self, key: str) -> Any:
        return self.values[key]


def _type_error(key: str, kind: str, value: Any) -> UsageError:
    want = {
        "int": "an integer",
        "float": "a number",
        "str": "a string",
        "bool": "true or false",
        "list": "a list of strings",
    }[kind.rstrip("?")]
    return UsageError(f"Setting `{key}` must be {want}, got {value!r}.")


def coerce(key: str, value: Any, *, from_text: bool = False) -> Any:
    """Check (and, for command-line text, parse) ``value`` for schema key ``key``."""
    if key not in SCHEMA:
        raise unknown_key(key)
    kind = SCHEMA[key].kind
    base = kind.rstrip("?")
    if kind.endswith("?") and (value is None or (from_text and value.lower() in ("none", "null"))):
        return None
    if from_text:
        value = _parse_text(key, base, value)
    if base == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            raise _type_error(key, kind, value)
    elif base == "float":
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise _type_error(key, kind, value)
        value = float(value)
    elif base == "str":
        if not isinstance(value, str):
            raise _type_error(key, kind, value)
    elif base == "bool":
        if not isinstance(value, bool):
            raise _type_error(key, kind, value)
    elif base == "list":
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
            raise _type_error(key, kind, value)
        value = list(value)
    return value


def _parse_text(key: str, base: str, text: str) -> Any:
    try:
        if base == "int":
            return int(text)
        if base == "float":
            return float(text)
    except ValueError:
        raise _type_error(key, base, text) from None
    if base == "bool":
        low = text.lower()
        if low in ("true", "1", "yes", "on"):
            return True
        if low in ("false", "0", "no", "off"):
            return False
        raise _type_error(key, base, text)
    if base == "list":
        return [part.strip() for part in text.split(",") if part.strip()]
    return text


def unknown_key(key: str) -> UsageError:
    """The error for a setting that does not exist (with the closest known name)."""
    import difflib

    close = difflib.get_close_matches(
        key, [*SCHEMA, f"{MODEL_CONFIG}.<field>", f"{SHARDING}.<logical axis>"], n=1
    )
    hint = f" (did you mean `{close[0]}`?)" if close else ""
    return UsageError(
        f"Unknown setting `{key}`{hint}; run `zoo train --help` or see the zoo-train README "
        "for the known settings."
    )


def flatten(
    data: Mapping[str, Any], *, source: str
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """A parsed config file as ``(dotted values, model_config changes, sharding rules)``."""
    values: dict[str, Any] = {}
    model_config: dict[str, Any] = {}
    sharding: dict[str, Any] = {}
    for name, value in data.items():
        if name in _FREE_TABLES:
            if not isinstance(value, Mapping):
                what = "model fields" if name == MODEL_CONFIG else "logical axis = mesh axes"
                raise UsageError(f"`{name}` in {source} must be a table of {what}.")
            (model_config if name == MODEL_CONFIG else sharding).update(value)
        elif name in _SECTIONS and isinstance(value, Mapping):
            for sub, v in value.items():
                values[f"{name}.{sub}"] = coerce(f"{name}.{sub}", v)
        elif name in _SECTIONS:
            raise UsageError(f"`{name}` in {source} must be a table, e.g. [{name}].")
        else:
            values[name] = coerce(name, value)
    return values, model_config, sharding


def read_config_file(
    path: str | pathlib.Path,
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """Read a TOML (``.toml``) or JSON (``.json``) config file into checked dotted settings."""
    path = pathlib.Path(path)
    if not path.is_file():
        raise UsageError(f"The config file {str(path)!r} does not exist; pass an existing file.")
    text = path.read_text(encoding="utf-8")
    try:
        if path.suffix == ".json":
            data = json.loads(text)
        elif path.suffix == ".toml":
            data = tomllib.loads(text)
        else:
            raise UsageError(f"The config file {str(path)!r} must end in .toml or .json.")
    except (json.JSONDecodeError, tomllib.TOMLDecodeError) as e:
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise UsageError(f"The config file {str(path)!r} is not valid ({first}); fix it.") from None
    if not isinstance(data, dict):
        raise UsageError(f"The config file {str(path)!r} must hold a table of settings.")
    return flatten(data, source=str(path))


def parse_assignment(text: str) -> tuple[str, str]:
    """``"KEY=VALUE"`` → ``(KEY, VALUE)`` (a ``--set`` argument)."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise UsageError(
            f"--set takes KEY=VALUE, got {text!r}; e.g. --set optimizer.warmup_steps=20."
        )
    return key.strip(), value


def resolve_settings(
    *,
    command: str,
    config_file: str | None,
    assignments: list[str],
    flags: dict[str, Any],
) -> Settings:
    """Merge defaults, the config file, ``--set`` assignments and explicit flags (in that order).

    Args:
        command: ``"train"``, ``"finetune"`` or ``"compile"`` (fine-tuning settings are refused
            for ``train`` and ``compile``).
        config_file: a TOML/JSON path, or ``None``.
        assignments: ``--set KEY=VALUE`` texts.
        flags: dotted key → value for the flags given on the command line (already typed).
    """
    values = {k: v.default for k, v in SCHEMA.items()}
    if command == "finetune":
        values.update(FINETUNE_DEFAULTS)
    model_config: dict[str, Any] = {}
    sharding: dict[str, Any] = {}
    if config_file is not None:
        file_values, file_model, file_sharding = read_config_file(config_file)
        values.update(file_values)
        model_config.update(file_model)
        sharding.update(file_sharding)
    for text in assignments:
        key, raw = parse_assignment(text)
        if key.startswith(MODEL_CONFIG + "."):
            model_config[key[len(MODEL_CONFIG) + 1 :]] = _model_value(raw)
        elif key.startswith(SHARDING + "."):
            sharding[key[len(SHARDING) + 1 :]] = _sharding_value(raw)
        else:
            values[key] = coerce(key, raw, from_text=True)
    for key, value in flags.items():
        if key == "mesh":
            values.update(parse_mesh(value))
            continue
        values[key] = coerce(key, value)
    if command in ("train", "compile"):
        given = [k for k, key in SCHEMA.items() if key.finetune_only and values[k] != key.default]
        if given:
            raise UsageError(f"`{given[0]}` is a fine-tuning setting; use `zoo finetune` for it.")
    return Settings(values=values, model_config=model_config, sharding=sharding)


def parse_mesh(text: str) -> dict[str, int]:
    """``--mesh data=1,fsdp=-1,tensor=1`` as the ``mesh.*`` settings (axes left out: defaults)."""
    from .parallel import MeshConfig

    try:
        config = MeshConfig.parse(text)
    except ValueError as e:
        raise UsageError.from_error(e) from None
    return {f"mesh.{k}": v for k, v in config.to_dict().items()}


def _sharding_value(raw: str) -> Any:
    # `--set sharding.embed=fsdp`, `=data,fsdp` or `=none`.
    text = raw.strip()
    if text.lower() in ("", "none", "null"):
        return None
    parts = [p.strip() for p in text.split(",") if p.strip()]
    return parts[0] if len(parts) == 1 else parts


def _model_value(raw: str) -> Any:
    # Model fields have many types; read the text as JSON when it parses (numbers, true, null).
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        return raw
