"""After the loop: the fine-tuned model exported, and a sample of what the model writes."""

from __future__ import annotations

import pathlib
from typing import Any

from ..parallel import is_primary
from ._run import Job, say


def export(job: Job, model: Any, target: str, generation: dict[str, Any]) -> None:
    """Write ``model`` (adapters merged) to ``target`` in the Hugging Face format, with its
    tokenizer, in the dtype the source checkpoint came in, stopping where it stopped. Every
    process gathers, process 0 writes, into a temporary sibling swapped in at the end."""
    from .._export import atomic_directory
    from .._runs import TOKENIZER_DIR, export_tokenizer
    from ..peft import export_hf

    with atomic_directory(target, enabled=is_primary()) as directory:
        path = export_hf(model, directory, dtype=job.model.init.get("dtype"), generation=generation)
        if is_primary():
            export_tokenizer(job.model.tokenizer, job.out / TOKENIZER_DIR, path)
    say(f"zoo: exported the model (adapters merged) to {pathlib.Path(target)}")


def sample(job: Job, model: Any, generation: dict[str, Any], *, step: int) -> None:
    """Print ``sample_tokens`` tokens continuing the settings' prompt (nothing when 0) and
    send them to the trackers at ``step``. Every process generates it (a sharded model);
    process 0 prints it."""
    s = job.settings
    if s.sample_tokens <= 0:
        return
    import zoo_models

    from .._inference import sample_text
    from ..parallel import mesh_context

    with mesh_context(job.mesh, job.rules):
        text = sample_text(
            model,
            job.model.tokenizer,
            s.prompt,
            max_new_tokens=s.sample_tokens,
            temperature=s.temperature,
            seed=s.seed,
            stop_tokens=zoo_models.stop_token_ids(generation, job.model.tokenizer),
        )
    if is_primary():
        print(f"--- sample ({s.sample_tokens} tokens, temperature {s.temperature}) ---")
        print(s.prompt + text)
    job.trackers.text("sample", s.prompt + text, step)
