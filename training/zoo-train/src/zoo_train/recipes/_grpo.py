"""The GRPO step of ``zoo finetune --objective grpo``: the prompts, the reward functions, the
reference (the base with the LoRA adapters off, or the starting weights once per batch), the
rollout that samples each step's completions, and the loss."""

from __future__ import annotations

import pathlib
from typing import Any

from .._usage import UsageError
from ..peft import LoRAConfig
from ..settings import FinetuneSettings
from ._data import Data
from ._model import Model
from ._preference import reference_weights
from ._run import say


def grpo_config(s: FinetuneSettings) -> Any:
    """The run's :class:`~zoo_train.grpo.GRPOConfig`.

    Raises:
        UsageError: a setting out of its range.
    """
    from ..grpo import GRPOConfig

    g = s.grpo
    try:
        return GRPOConfig(
            num_generations=g.num_generations,
            max_completion_length=g.max_completion_length,
            temperature=g.temperature,
            top_p=g.top_p,
            beta=0.0 if s.beta is None else s.beta,
            epsilon=g.epsilon,
            epsilon_high=g.epsilon_high,
            loss_type=g.loss_type,
            num_iterations=g.num_iterations,
            scale_rewards=g.scale_rewards,
        )
    except ValueError as e:
        raise UsageError.from_error(e) from None


def grpo_data(
    s: FinetuneSettings,
    model: Model,
    lora: LoRAConfig | None,
    mesh: Any,
    stop_tokens: tuple[int, ...],
) -> tuple[Data, Any, Any, Any]:
    """``(data, rollout, loss, hook)``: the prompts as the loop's data, the rollout making each
    step's batch, the loss, and the hook writing sample completions (``None``: never).

    Raises:
        UsageError: a prompt file or reward function that does not load, a prompt too long,
            or prompts and completions longer than the model's positions.
    """
    from .._precision import resolve_compute_dtype
    from ..grpo import CompletionLog, Rewards, grpo_parts, read_prompts
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
        reference, reference_model = "batch", reference_weights(s, model, lora)
    source, rollout, loss = grpo_parts(
        prompts,
        rewards,
        model.tokenizer,
        grpo=grpo,
        config=s.train_config(),
        max_prompt_length=g.max_prompt_length,
        stop_tokens=stop_tokens,
        reference=reference,
        reference_model=reference_model,
        mesh=mesh,
        compute_dtype=resolve_compute_dtype(s.compute_dtype, platform_of(mesh)),
        pad_id=stop_tokens[0] if stop_tokens else 0,
    )
    described = {None: "no reference", "adapters": "reference: the base model with the LoRA "
                 "adapters switched off", "batch": "reference: the starting weights, once per "
                 "batch"}[reference]  # fmt: skip
    say(
        f"zoo: grpo ({grpo.loss_type}, beta {grpo.beta:g}, {described}), rewards "
        f"{', '.join(rewards.names)}; {grpo.num_generations} completions of up to "
        f"{grpo.max_completion_length} tokens per prompt"
    )
    names = ", ".join(str(p) for p in s.data)
    data = Data(
        source,
        None,
        f"{len(prompts):,} prompts from {names}",
        headline=(
            f"{s.steps} steps of {s.batch_size * s.grad_accum} completions "
            f"({s.batch_size * s.grad_accum // grpo.num_generations} prompts x "
            f"{grpo.num_generations})"
        ),
        closers=[rewards.close],  # the reward functions' processes end with the run
    )
    hook = None
    if g.sample_every > 0:
        hook = (CompletionLog(rollout, pathlib.Path(s.out)), g.sample_every)
    return data, rollout, loss, hook
