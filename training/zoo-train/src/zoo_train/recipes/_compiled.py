"""The step ``zoo compile`` compiles: the one ``zoo train`` or ``zoo finetune`` would take
with the same settings, its model a builder (no weight is read or allocated)."""

from __future__ import annotations

import json
import pathlib
from typing import Any

from .._usage import UsageError
from ..settings import OBJECTIVES, FinetuneSettings
from ._finetuning import finetune_step
from ._lora import lora_settings
from ._model import hf_config_changes, preset_config
from ._preference import objective_loss

# Settings of `zoo finetune` that say where a model comes from or goes, which compiling needs
# none of (a zoo run's model is compiled through its Hugging Face export).
NOT_COMPILED = {"from_run": "--from-run", "export_hf": "--export-hf", "overwrite": "--overwrite"}


def check_compiled_objective(objective: str) -> None:
    """The objectives whose step ``zoo compile`` builds: ``sft`` and the preference ones (a
    GRPO step samples its completions first, which it does not compile).

    Raises:
        UsageError: another objective, in one sentence.
    """
    if objective not in OBJECTIVES:
        raise UsageError(f"--objective must be one of {', '.join(OBJECTIVES)}; got {objective!r}.")
    if objective == "grpo":
        raise UsageError(
            "zoo compile compiles the sft and preference (dpo, ipo, simpo, orpo) steps; a GRPO "
            "step samples its completions before it trains, which it does not compile, so "
            "drop --objective grpo."
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


def compiled_step(s: FinetuneSettings, model_config: Any, mesh: Any) -> tuple[Any, Any, Any]:
    """``(spec, lora, full)``: the :class:`~zoo_train.program.StepSpec` of the run the
    settings describe, on ``mesh`` (LoRA adapters and the preference objective as ``zoo
    finetune`` builds them), its LoRA settings (``None``: every parameter trains), and the
    same step with every parameter trained (what LoRA is compared with)."""
    import jax

    import zoo_models

    given = [flag for key, flag in NOT_COMPILED.items() if getattr(s, key)]
    if given:
        raise UsageError(
            f"zoo compile takes no {given[0]}: it compiles a step from --model or --from-hf "
            "and writes nothing."
        )
    lora = lora_settings(s, model_config)
    made = objective_loss(s, lora, mesh)
    key = jax.random.key(s.seed)

    def build() -> Any:
        return zoo_models.build(model_config, key=key)

    config, loss_fn = s.train_config(), None if made is None else made[0]
    try:
        spec = finetune_step(build, config, lora=lora, key=key, loss_fn=loss_fn, mesh=mesh)
    except ValueError as e:
        raise UsageError.from_error(e) from None
    return spec, lora, finetune_step(build, config, loss_fn=loss_fn, mesh=mesh)
