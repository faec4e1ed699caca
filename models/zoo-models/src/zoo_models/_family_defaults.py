"""Per-family defaults that depend on how a family lays out its Hugging Face weights."""

from __future__ import annotations

from ._config import FAMILIES, ModelConfig

__all__ = ["default_lora_targets"]

#: The attention projections: every family stores q, k, v and o as modules of their own.
_ATTENTION = ("q", "k", "v", "o")
# GPT-2 fuses q, k and v into one module (c_attn), which a PEFT adapter cannot split: its
# default adapts the attention output and the MLP instead.
_LORA_TARGETS: dict[str, tuple[str, ...]] = {"gpt2": ("o", "up", "down")}


def default_lora_targets(family: str | ModelConfig) -> tuple[str, ...]:
    """The LoRA targets a family is fine-tuned with when none are named: short names of the
    projections (``q k v o`` for the attention, ``gate up down`` for the MLP), each a module of
    its own in the family's Hugging Face layout, so the adapters are a PEFT adapter.

    Args:
        family: a family name (``"llama"``, ``"gpt2"``, ...) or a :class:`ModelConfig`.
    """
    name = family.family if isinstance(family, ModelConfig) else family
    if name not in FAMILIES:
        raise ValueError(f"unknown family {name!r}; known families: {', '.join(FAMILIES)}.")
    return _LORA_TARGETS.get(name, _ATTENTION)
