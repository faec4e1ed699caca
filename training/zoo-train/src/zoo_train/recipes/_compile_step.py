"""The step ``zoo compile`` lowers: the trainer ``zoo train`` or ``zoo finetune`` would build
with the same settings, its model a builder (no weight is read or allocated)."""

from __future__ import annotations

import json
import pathlib
from typing import Any

from .._usage import UsageError
from ..loop import Trainer
from ..peft import LoRAConfig, add_adapters
from ..settings import OBJECTIVES, FinetuneSettings
from ._preference import preference_loss
from ._steps import hf_config_changes, lora_settings, preset_config

# Settings of `zoo finetune` that say where a model comes from or goes, which compiling needs
# none of (a zoo run's model is compiled through its Hugging Face export).
NOT_COMPILED = {"from_run": "--from-run", "export_hf": "--export-hf", "overwrite": "--overwrite"}


def check_compiled_objective(objective: str) -> None:
    """The objectives whose step ``zoo compile`` builds: ``sft`` and the preference ones (a
    GRPO step samples its completions first, and a distillation's needs its teacher, which it
    does not compile).

    Raises:
        UsageError: another objective, in one sentence.
    """
    if objective not in OBJECTIVES:
        raise UsageError(f"--objective must be one of {', '.join(OBJECTIVES)}; got {objective!r}.")
    if objective in ("grpo", "distill"):
        what = {
            "grpo": "a GRPO step samples its completions before it trains",
            "distill": "a distillation step runs its teacher beside the student",
        }[objective]
        raise UsageError(
            f"zoo compile compiles the sft and preference (dpo, ipo, simpo, orpo) steps; {what}, "
            f"which it does not compile, so drop --objective {objective}."
        )


def check_json_output(path: str | None, inputs: list[str | None]) -> None:
    """``--json FILE``, before the compiles (which take minutes): a file path of its own,
    never a directory, an input or a path inside one.

    Raises:
        UsageError: one sentence naming it.
    """
    if path is None:
        return
    from zoo_data import check_output_path

    try:
        check_output_path(path, inputs, flag="--json", kind="file")
    except ValueError as e:
        raise UsageError.from_error(e) from None


def compiled_model_config(s: FinetuneSettings) -> Any:
    """The ``ModelConfig`` compiled: the preset's (``--model``), or that of the Hugging Face
    directory ``--from-hf`` (its ``config.json`` alone, float32 master weights as ``zoo
    finetune`` trains them), with ``model_config`` and the attention kernel set."""
    import zoo_models

    if s.from_hf is None:
        return preset_config(s)  # the preset's own vocabulary, unlike a byte-level `zoo train`
    source = pathlib.Path(s.from_hf) / "config.json"
    try:
        hf = json.loads(source.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise UsageError(f"--from-hf {s.from_hf!r}: cannot read its config.json ({e}).") from None
    try:
        return zoo_models.from_hf_config(hf, source=str(source), **hf_config_changes(s))
    except ValueError as e:
        raise UsageError.from_error(e) from None


def compiled_trainer(
    s: FinetuneSettings, model_config: Any, mesh: Any
) -> tuple[Trainer, LoRAConfig | None, Trainer]:
    """``(trainer, lora, full)``: the :class:`~zoo_train.Trainer` of the run the settings
    describe, on ``mesh`` (LoRA adapters and the preference objective as ``zoo finetune``
    builds them), its LoRA settings (``None``: every parameter trains), and the same trainer
    with every parameter trained (what LoRA is compared with)."""
    import jax

    import zoo_models

    given = [flag for key, flag in NOT_COMPILED.items() if getattr(s, key)]
    if given:
        raise UsageError(
            f"zoo compile takes no {given[0]}: it compiles a step from --model or --from-hf "
            "and writes nothing."
        )
    lora = lora_settings(s, model_config)
    loss_fn = None if s.objective == "sft" else preference_loss(s, lora, mesh)[0]
    key = jax.random.key(s.seed)

    def build() -> Any:
        return zoo_models.build(model_config, key=key)

    config = s.train_config()
    full = Trainer(config, build, loss_fn, mesh=mesh)
    if lora is None:
        return full, None, full
    try:
        adapted, trainable = add_adapters(build, lora, key=key)
        return Trainer(config, adapted, loss_fn, mesh=mesh, trainable=trainable), lora, full
    except ValueError as e:
        raise UsageError.from_error(e) from None
