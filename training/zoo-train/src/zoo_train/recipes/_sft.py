"""``zoo finetune --objective sft``: a Hugging Face checkpoint or a zoo run trained further on
the next-token loss of its data (the responses alone, for chat and prompt/completion data),
fully or with LoRA adapters, and exported."""

from __future__ import annotations

import functools
import pathlib

from ..settings import FinetuneSettings
from ._steps import (
    build_data,
    check_data_kind,
    check_finetune,
    complete_step,
    finetune_source,
    finetune_trainer,
    finish_finetune,
    mesh_and_rules,
    open_trackers,
    output_directory,
    saved_provenance,
    say_complete,
    steps_for_epochs,
    train_and_report,
)


def sft(s: FinetuneSettings) -> int:
    """Fine-tune ``s.from_hf`` or ``s.from_run`` into ``s.out`` (resuming what is there) and
    export it to ``s.export_hf``; returns the exit code."""
    check_finetune(s, functools.partial(check_data_kind, pairs=False))
    out = pathlib.Path(s.out)
    done = complete_step(s)
    if done is not None:  # nothing is loaded, nothing in the run is touched
        return say_complete(out, done, s)
    # One training process per output directory.
    with output_directory(out), open_trackers(s, out) as trackers:
        mesh, rules = mesh_and_rules(s.mesh_text, s.sharding)
        saved = saved_provenance(out)
        model, lora = finetune_source(s, out, mesh, rules, seq_len=s.seq_len)
        with build_data(s, model.tokenizer) as data:
            s = steps_for_epochs(s, data.train)
            trainer = finetune_trainer(s, model, lora, None, mesh)
            result = train_and_report(trainer, s, "finetune", model, data, lora, saved, trackers)
        finish_finetune(s, trainer, model, lora, result, trackers)
    return 0
