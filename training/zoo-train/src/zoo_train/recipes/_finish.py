"""After the loop: the fine-tuned model exported, and a sample of what the model writes."""

from __future__ import annotations

import pathlib
from typing import Any

from ..parallel import is_primary
from ._export_record import read_export, write_export
from ._steps import Job, say


def export(
    job: Job, model: Any, target: str | pathlib.Path, generation: dict[str, Any], step: int
) -> None:
    """Write ``model`` (adapters merged) to ``target`` in the Hugging Face format, with its
    tokenizer, in the dtype the source checkpoint came in, stopping where it stopped, and
    record in the run that ``target`` holds ``step``. Every process gathers, process 0
    writes, into a temporary sibling swapped in at the end."""
    from .._export_directory import atomic_directory
    from .._run_directory import TOKENIZER_DIR, export_tokenizer
    from ..peft import export_hf

    with atomic_directory(target, enabled=is_primary()) as directory:
        path = export_hf(model, directory, dtype=job.model.init.get("dtype"), generation=generation)
        if is_primary():
            export_tokenizer(job.model.tokenizer, job.out / TOKENIZER_DIR, path)
    if is_primary():
        write_export(job.out, target, step)
    say(f"zoo: exported the model at step {step} (adapters merged) to {pathlib.Path(target)}")


def export_again(job: Job, model: Any, generation: dict[str, Any], step: int) -> None:
    """After an extension without ``--export-hf``: export again where the run exported before
    (named), when that export is older than ``step``; say so when it is gone."""
    record = read_export(job.out)
    if record is None or record.step == step:
        return
    if not (record.path / "config.json").is_file():
        say(
            f"zoo: the run's export in {record.path} (step {record.step}) is gone; pass "
            f"--export-hf DIR to export step {step}."
        )
        return
    say(f"zoo: {record.path} held step {record.step}; exporting step {step} there")
    export(job, model, record.path, generation, step)


def sample(job: Job, model: Any, generation: dict[str, Any], *, step: int) -> None:
    """Print up to ``sample_tokens`` tokens continuing the settings' prompt (nothing when 0),
    under a header with the number generated (fewer at a stop token or the model's positions),
    and send them to the trackers at ``step``. Every process generates it (a sharded model);
    process 0 prints it."""
    s = job.settings
    if s.sample_tokens <= 0:
        return
    import zoo_models

    from .._inference import sample_ids
    from ..parallel import mesh_context

    with mesh_context(job.mesh, job.rules):
        ids = sample_ids(
            model,
            job.model.tokenizer,
            s.prompt,
            max_new_tokens=s.sample_tokens,
            temperature=s.temperature,
            seed=s.seed,
            stop_tokens=zoo_models.stop_token_ids(generation, job.model.tokenizer),
        )
    text = job.model.tokenizer.decode(ids)
    if is_primary():
        count = f"{len(ids)} token{'' if len(ids) == 1 else 's'}"
        print(f"--- sample ({count}, temperature {s.temperature}) ---")
        print(s.prompt + text)
    job.trackers.text("sample", s.prompt + text, step)
