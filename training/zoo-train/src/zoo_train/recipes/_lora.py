"""The LoRA adapters of a fine-tune: from ``--lora-rank`` and ``--lora-targets``, or those of
the PEFT adapter ``--lora-from`` continues."""

from __future__ import annotations

import pathlib

from .._usage import UsageError
from ..peft import LoRAConfig, read_peft_config
from ..settings import FinetuneSettings
from ._model import Model


def lora_config(s: FinetuneSettings, model: Model) -> LoRAConfig | None:
    """The adapters' settings (``None``: full fine-tuning); an adapter continued is recorded in
    ``model.init``."""
    if s.lora.from_ is not None:
        lora = _adapter_settings(s)
        model.init["adapter"] = str(pathlib.Path(s.lora.from_).resolve())
        return lora
    return lora_settings(s, model.config)


def lora_settings(s: FinetuneSettings, config: object) -> LoRAConfig | None:
    """The adapters of ``--lora-rank`` and ``--lora-targets`` (default: the family's) on a
    model of ``config``, or those of the adapter ``--lora-from`` continues; ``None``: full
    fine-tuning."""
    import zoo_models

    if s.lora.from_ is not None:
        return _adapter_settings(s)
    if s.lora.rank == 0:
        return None
    try:
        targets = tuple(t for item in s.lora.targets for t in item.split(",") if t)
        targets = targets or zoo_models.default_lora_targets(config)  # type: ignore[arg-type]
        return LoRAConfig(rank=s.lora.rank, alpha=s.lora.alpha, targets=targets)
    except ValueError as e:
        raise UsageError(str(e)) from None


def _adapter_settings(s: FinetuneSettings) -> LoRAConfig:
    """The LoRA settings of the PEFT adapter ``--lora-from`` continues; a different
    ``--lora-rank`` is refused."""
    try:
        lora = read_peft_config(s.lora.from_)  # type: ignore[arg-type]
    except ValueError as e:
        raise UsageError(str(e)) from None
    if s.lora.rank not in (0, lora.rank):
        raise UsageError(
            f"The adapter in {s.lora.from_!r} has rank {lora.rank}, not {s.lora.rank}; "
            "drop --lora-rank (the adapter's own settings are used)."
        )
    return lora
