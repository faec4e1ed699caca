"""``zoo finetune --objective grpo``: GRPO on prompts scored by reward functions. The prompts,
the reward functions, the reference (the base with the LoRA adapters off, or the starting
weights once per batch), the rollout that samples each step's completions from the model being
trained (a transform of the prompt stream), and the loss."""

from __future__ import annotations

import dataclasses
import pathlib
from typing import Any

from .._usage import UsageError
from ..loop import RolloutData
from ..peft import LoRAConfig
from ..settings import FinetuneSettings
from . import _steps as steps


def grpo(s: FinetuneSettings) -> int:
    """GRPO-tune ``s.from_hf`` or ``s.from_run`` on the prompts of ``s.data`` into ``s.out``
    (resuming what is there) and export it to ``s.export_hf``; returns the exit code."""
    from ..grpo import CompletionLog

    steps.check_finetune(s, _check)
    if steps.already_complete(s):  # nothing is loaded, nothing in the run is touched
        return 0
    out = pathlib.Path(s.out)
    # One training process per output directory.
    with steps.output_directory(out), steps.open_trackers(s, out) as trackers:
        mesh, rules = steps.mesh_and_rules(s.mesh_text, s.sharding)
        saved = steps.saved_provenance(out)
        model, lora = steps.finetune_source(s, out, mesh, rules)
        data, rollout, loss = prompt_data(s, model, lora, mesh)
        with data:
            objective = {"name": "grpo", "beta": s.beta}  # resumed only with the same
            trainer = steps.finetune_trainer(s, model, lora, loss, mesh, objective=objective)
            if s.grpo.sample_every > 0:
                trainer.add_hook(CompletionLog(rollout, out), every=s.grpo.sample_every)
            result = steps.train_and_report(
                trainer, s, "finetune", model, data, lora, saved, trackers
            )
        steps.finish_finetune(s, trainer, model, lora, result, trackers)
    return 0


def _check(s: FinetuneSettings) -> None:
    """GRPO's prompts (JSON lines files) and reward functions are named, and nothing is
    evaluated on held-out data (its loss needs rollouts)."""
    if not s.data or not all(str(p).endswith(".jsonl") and pathlib.Path(p).is_file()
                             for p in s.data):  # fmt: skip
        raise UsageError(
            "--objective grpo samples completions of prompts; pass them with --data as JSON "
            "lines files (`prompt` as text or chat messages, any other columns for the rewards)."
        )
    if s.eval_data:
        raise UsageError("--objective grpo evaluates no held-out data; drop --eval-data.")
    if s.epochs is not None:
        raise UsageError("--objective grpo counts its length in --steps; drop --epochs.")
    if not s.grpo.reward:
        raise UsageError(
            "--objective grpo needs at least one --reward (module:function, "
            "path/to/file.py:function, or answer_match, format_match, length_penalty)."
        )
    if s.grpo.reward_weights and len(s.grpo.reward_weights) != len(s.grpo.reward):
        raise UsageError(
            f"--reward-weights gives {len(s.grpo.reward_weights)} weights for "
            f"{len(s.grpo.reward)} reward functions; give one per --reward."
        )
    rows = s.batch_size * s.grad_accum
    if rows % s.grpo.num_generations:
        raise UsageError(
            f"--batch-size x --grad-accum = {rows} completions per step are not whole groups "
            f"of --num-generations {s.grpo.num_generations}; make it a multiple."
        )


def grpo_config(s: FinetuneSettings) -> Any:
    """The run's :class:`~zoo_train.grpo.GRPOConfig`: ``[grpo]``, with ``--beta`` its KL
    weight (none: 0, no reference)."""
    return dataclasses.replace(s.grpo, beta=0.0 if s.beta is None else s.beta)


def prompt_data(
    s: FinetuneSettings, model: steps.Model, lora: LoRAConfig | None, mesh: Any
) -> tuple[steps.Data, Any, Any]:
    """``(data, rollout, loss)``: the prompts as the trainer's data, each step's batch made
    from them by the rollout with the model being trained, and the loss.

    Raises:
        UsageError: a prompt file or reward function that does not load, a prompt too long,
            or prompts and completions longer than the model's positions.
    """
    from .._precision import resolve_compute_dtype
    from ..grpo import Rewards, grpo_parts, read_prompts
    from ..parallel import platform_of

    g, grpo = s.grpo, grpo_config(s)
    width = g.max_prompt_length + g.max_completion_length
    if width > model.config.max_position:
        raise UsageError(
            f"--max-prompt-length {g.max_prompt_length} + --max-completion-length "
            f"{g.max_completion_length} = {width} is longer than the model's "
            f"{model.config.max_position} positions; lower them."
        )
    try:
        prompts = read_prompts(
            s.data,
            model.tokenizer,
            max_prompt_length=g.max_prompt_length,
            long_prompts=g.long_prompts,
        )
        rewards = Rewards.load(g.reward, g.reward_weights or None, timeout=g.reward_timeout)
    except ValueError as e:
        raise UsageError.from_error(e) from None
    if grpo.beta == 0:
        reference, reference_model = None, None
    elif lora is not None and s.lora.from_ is None:
        reference, reference_model = "adapters", None
    else:
        reference, reference_model = "batch", steps.reference_weights(s, model, lora)
    stops = steps.stop_tokens(s, model.tokenizer)
    source, rollout, loss = grpo_parts(
        prompts,
        rewards,
        model.tokenizer,
        grpo=grpo,
        config=s.train_config(),
        max_prompt_length=g.max_prompt_length,
        stop_tokens=stops,
        reference=reference,
        reference_model=reference_model,
        mesh=mesh,
        compute_dtype=resolve_compute_dtype(s.compute_dtype, platform_of(mesh)),
        pad_id=stops[0] if stops else 0,
    )
    described = {None: "no reference", "adapters": "reference: the base model with the LoRA "
                 "adapters switched off", "batch": "reference: the starting weights, once per "
                 "batch"}[reference]  # fmt: skip
    steps.say(
        f"zoo: grpo ({grpo.loss_type}, beta {grpo.beta:g}, {described}), rewards "
        f"{', '.join(rewards.names)}; {grpo.num_generations} completions of up to "
        f"{grpo.max_completion_length} tokens per prompt"
    )
    names = ", ".join(str(p) for p in s.data)
    data = steps.Data(
        RolloutData(source, rollout),
        None,
        f"{len(prompts):,} prompts from {names}",
        headline=(
            f"{s.steps} steps of {s.batch_size * s.grad_accum} completions "
            f"({s.batch_size * s.grad_accum // grpo.num_generations} prompts x "
            f"{grpo.num_generations})"
        ),
        closers=[rewards.close],  # the reward functions' processes end with the run
    )
    return data, rollout, loss
