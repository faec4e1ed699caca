"""``zoo finetune``: a Hugging Face checkpoint or a zoo run, trained further, fully or with
LoRA adapters, and exported."""

from __future__ import annotations

import pathlib

from ..settings import FinetuneSettings
from ._checks import check_finetune
from ._complete import complete_step, say_complete
from ._data import build_data
from ._epochs import steps_for_epochs
from ._finish import export, export_again, sample
from ._grpo import grpo_data
from ._lora import lora_config
from ._mesh import LOWER_BATCH, check_mesh_fits, check_train_positions, mesh_and_rules
from ._model import source_model
from ._output import output_directory
from ._preference import preference_loss
from ._run import Job, open_trackers, run, saved_provenance, say, stop_tokens, trained


def _width(s: FinetuneSettings) -> tuple[int, str]:
    """Tokens in a row of a step's batch (a prompt and its completion for GRPO), and what
    to lower when the batch does not fit."""
    if s.objective == "grpo":
        width = s.grpo.max_prompt_length + s.grpo.max_completion_length - 1
        return width, "lower --batch-size, --grad-accum or the prompt and completion lengths"
    return s.seq_len, LOWER_BATCH


def finetune_recipe(s: FinetuneSettings) -> int:
    """Fine-tune ``s.from_hf`` or ``s.from_run`` into ``s.out`` (resuming what is there) and
    export it to ``s.export_hf``; returns the exit code."""
    import jax

    from .._capacity import check_batch_fits
    from .._runs import read_generation
    from ..peft import ADAPTER_DIR
    from ._finetuning import finetune

    check_finetune(s)
    out = pathlib.Path(s.out)
    done = complete_step(s)
    if done is not None:  # nothing is loaded, nothing in the run is touched
        say_complete(out, done, s)
        return 0
    # One training process per output directory.
    with output_directory(out), open_trackers(s, out) as trackers:
        mesh, rules = mesh_and_rules(s.mesh_text, s.sharding)
        saved = saved_provenance(out)
        model = source_model(s, out, mesh, rules)
        check_mesh_fits(mesh, rules, model.config, batch_size=s.batch_size, seq_len=s.seq_len)
        check_batch_fits(s.batch_size * s.grad_accum, *_width(s))
        # A rotary Hugging Face model takes a longer context from model_config; a zoo run's
        # model is what it was trained as.
        settable = s.from_hf is not None and model.config.positional == "rope"
        lora = lora_config(s, model)
        extra: dict = {}
        if s.objective == "grpo":  # prompts; each step's batch is sampled from the model
            data, rollout, loss_fn, hook = grpo_data(s, model, lora, mesh, stop_tokens(s, model))
            extra = {"rollout": rollout, "hooks": [] if hook is None else [hook]}
        else:
            check_train_positions(model.config, s.seq_len, settable=settable)
            data = build_data(s, model.tokenizer)
        with data:
            if s.objective != "grpo":
                s = steps_for_epochs(s, data.train)
                loss_fn = preference_loss(s, model, data, lora, out, mesh, rules)
            job = Job("finetune", s, out, mesh, rules, model, data, lora, saved, trackers)
            result = run(
                job,
                finetune,
                lora=lora,
                key=jax.random.key(s.seed),
                adapter_from=s.lora.from_,
                loss_fn=loss_fn,
                **extra,
            )
        if lora is not None and trained(result):
            say(f"zoo: LoRA adapters (only) in {out / ADAPTER_DIR}")
        # Every process reads them alike: each one generates the final sample.
        generation = read_generation(s.from_hf or s.from_run)  # type: ignore[arg-type]
        if s.export_hf is not None:
            export(job, result.model, s.export_hf, generation, result.step)
        elif trained(result):
            export_again(job, result.model, generation, result.step)
        if trained(result):
            sample(job, result.model, generation, step=result.step)
    return 0
