"""``zoo finetune --objective sft``: a Hugging Face checkpoint or a zoo run trained further on
the next-token loss of its data (the responses alone, for chat and prompt/completion data),
fully or with LoRA adapters, and exported."""

from __future__ import annotations

import functools
import pathlib

from ..settings import FinetuneSettings
from . import _steps as steps


def sft(s: FinetuneSettings) -> int:
    """Fine-tune ``s.from_hf`` or ``s.from_run`` into ``s.out`` (resuming what is there) and
    export it to ``s.export_hf``; returns the exit code."""
    steps.check_finetune(s, functools.partial(steps.check_data_kind, pairs=False))
    if steps.already_complete(s):  # nothing is loaded, nothing in the run is touched
        return 0
    out = pathlib.Path(s.out)
    # One training process per output directory.
    with steps.output_directory(out), steps.open_trackers(s, out) as trackers:
        mesh, rules = steps.mesh_and_rules(s.mesh_text, s.sharding)
        saved = steps.saved_provenance(out)
        model, lora = steps.finetune_source(s, out, mesh, rules, seq_len=s.seq_len)
        with steps.build_data(s, model.tokenizer) as data:
            s = steps.epochs_as_steps(s, data.train)
            trainer = steps.finetune_trainer(s, model, lora, None, mesh)
            result = steps.train_and_report(
                trainer, s, "finetune", model, data, lora, saved, trackers
            )
        steps.finish_finetune(s, trainer, model, lora, result, trackers)
    return 0
