"""The family registry: one :class:`Family` record per model family, looked up by its name
(``ModelConfig.family``) or by the ``model_type`` of a Hugging Face ``config.json``.

The shared machinery (``from_hf_config``, ``to_hf_config``, ``load_hf``, ``save_hf``, the
presets) asks this registry; nothing outside the family modules names a family.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from .._config import ModelConfig
from .._family_names import add_name, remove_name
from .._hf_weights import Rule

__all__ = [
    "Family",
    "Reader",
    "Writer",
    "default_lora_targets",
    "family_names",
    "lookup",
    "model_types",
    "reader",
    "register",
    "registered",
    "unregister",
]

#: A parsed ``config.json`` → the :class:`ModelConfig` fields it describes.
Reader = Callable[[Mapping[str, Any]], dict[str, Any]]
#: A :class:`ModelConfig` → the family's own ``config.json`` keys.
Writer = Callable[[ModelConfig], dict[str, Any]]

#: The attention projections: every family but GPT-2 stores q, k, v and o as modules of their own.
ATTENTION_PROJECTIONS = ("q", "k", "v", "o")


def _no_aliases(names: set[str]) -> dict[str, str]:
    return {}


def _as_stored(tensors: Mapping[str, Any], config: ModelConfig, source: str) -> Mapping[str, Any]:
    return tensors


@dataclasses.dataclass(frozen=True)
class Family:
    """Everything that is one model family's.

    Attributes:
        name: ``ModelConfig.family``, and the ``model_type`` its ``config.json`` is written with.
        architecture: the ``transformers`` class that ``config.json``'s ``architectures`` names.
        read: a parsed ``config.json`` → :class:`ModelConfig` fields (``family`` among them).
        write: a :class:`ModelConfig` → the family's ``config.json`` keys; ``to_hf_config``
            adds the shared ones (``model_type``, ``architectures``, special ids, tie, dtype).
        hf_keys: :class:`ModelConfig` field → its ``config.json`` key, so that a bad value is
            reported under the name the user sees in the file.
        top_rules: the weight rules of the tensors outside the layers.
        layer_rules: the weight rules of layer ``i`` (``{i}`` in their names stands for it).
        presets: preset name → :class:`ModelConfig`, built when first asked (a config checks
            its family against this registry). Names ending in ``-tiny`` are test-sized.
        also_reads: further ``model_type`` values this family reads, each with its reader
            (Gemma 3's image-and-text config, read for its language model).
        aliases: the tensor names a checkpoint holds → {expected name: stored name}, for
            checkpoints that store the family's tensors under other names.
        ignorable: patterns of tensors a checkpoint may carry that are no parameter of the model.
        lora_targets: the projections LoRA adapts when none are named; each must be a module of
            its own in the Hugging Face layout, so the adapters are a PEFT adapter.
        view: ``view(tensors, config, source)``: the checkpoint's tensors as the weight rules
            read them (gpt-oss: MXFP4 pairs dequantized; DeepSeek-V3: multi-token-prediction
            layers left out, with one line saying so); the tensors as stored by default.
    """

    name: str
    architecture: str
    read: Reader
    write: Writer
    hf_keys: Mapping[str, str]
    top_rules: Callable[[ModelConfig], list[Rule]]
    layer_rules: Callable[[ModelConfig, int], list[Rule]]
    presets: Callable[[], Mapping[str, ModelConfig]]
    also_reads: Mapping[str, Reader] = dataclasses.field(default_factory=dict)
    aliases: Callable[[set[str]], dict[str, str]] = _no_aliases
    ignorable: tuple[str, ...] = ()
    lora_targets: tuple[str, ...] = ATTENTION_PROJECTIONS
    view: Callable[[Mapping[str, Any], ModelConfig, str], Mapping[str, Any]] = _as_stored


_FAMILIES: dict[str, Family] = {}


def register(family: Family) -> Family:
    """Add ``family`` to the registry and return it.

    Raises:
        ValueError: its name or a ``model_type`` it reads is already registered.
    """
    taken = set(model_types())
    clash = sorted(taken & {family.name, *family.also_reads})
    if clash:
        raise ValueError(
            f"model type(s) {', '.join(clash)} already registered; give family "
            f"{family.name!r} a name of its own."
        )
    _FAMILIES[family.name] = family
    add_name(family.name)
    return family


def unregister(name: str) -> None:
    """Remove the family ``name`` (a family registered for a test, say)."""
    lookup(name)
    del _FAMILIES[name]
    remove_name(name)


def registered() -> tuple[Family, ...]:
    """Every registered family, in registration order."""
    return tuple(_FAMILIES.values())


def family_names() -> tuple[str, ...]:
    """The names of every registered family, in registration order."""
    return tuple(_FAMILIES)


def model_types() -> tuple[str, ...]:
    """Every ``model_type`` a registered family reads: the families' names, then those they
    also read."""
    also = [t for f in _FAMILIES.values() for t in f.also_reads]
    return (*_FAMILIES, *also)


def lookup(name: str) -> Family:
    """The family called ``name``.

    Raises:
        ValueError: no such family (the message lists the known ones).
    """
    try:
        return _FAMILIES[name]
    except (KeyError, TypeError):
        raise ValueError(
            f"unknown family {name!r}; known families: {', '.join(_FAMILIES)}."
        ) from None


def reader(model_type: object) -> tuple[Family, Reader] | None:
    """The family that reads ``config.json``'s ``model_type`` and its reader, or ``None``."""
    for family in _FAMILIES.values():
        if model_type == family.name:
            return family, family.read
        if isinstance(model_type, str) and model_type in family.also_reads:
            return family, family.also_reads[model_type]
    return None


def default_lora_targets(family: str | ModelConfig) -> tuple[str, ...]:
    """The LoRA targets a family is fine-tuned with when none are named: short names of the
    projections (``q k v o`` for the attention, ``gate up down`` for the MLP), each a module of
    its own in the family's Hugging Face layout, so the adapters are a PEFT adapter.

    Args:
        family: a family name (``"llama"``, ``"gpt2"``, ...) or a :class:`ModelConfig`.
    """
    name = family.family if isinstance(family, ModelConfig) else family
    return lookup(name).lora_targets
