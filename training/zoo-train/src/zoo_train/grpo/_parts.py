"""The parts of a GRPO run through :class:`zoo_train.Trainer`, with its checkpoints, resume,
metrics and hooks: the trainer's data are prompt rows (:class:`PromptSource`); each step's batch
is sampled from them with the parameters being trained (:class:`Rollout`, a transform of the
prompt stream: ``zoo_train.RolloutData(source, rollout)``) and trained on with
:class:`GRPOLoss`; :class:`CompletionLog` is a hook writing sample completions."""

from __future__ import annotations

import json
import pathlib
from collections.abc import Sequence
from typing import Any

from jax.sharding import Mesh

from ..loop import StepEnd
from ..parallel import BatchLayout, is_primary, make_mesh, make_rules
from ..settings import GRPOConfig, TrainConfig
from ._loss import GRPOLoss
from ._prompts import Prompt, PromptSource
from ._rewards import Rewards
from ._rollout import Rollout

#: Where sample completions are written, in the run's directory.
COMPLETIONS_FILE = "completions.jsonl"


class CompletionLog:
    """A loop hook writing the first ``rows`` completions of the step's rollouts, their prompts,
    rewards and advantages to ``OUT/completions.jsonl`` (process 0)."""

    def __init__(self, rollout: Rollout, out: pathlib.Path, rows: int = 4) -> None:
        self.rollout = rollout
        self.path = out / COMPLETIONS_FILE
        self.rows = rows

    def after_step(self, end: StepEnd) -> None:
        """Write the completions of the step just taken."""
        last = self.rollout.last
        if last is None or not is_primary():
            return
        with self.path.open("a") as f:
            for i in range(min(self.rows, len(last.completions))):
                rec = {
                    "step": end.step,
                    "prompt": last.prompts[i],
                    "completion": last.completions[i],
                    "rewards": {k: v[i] for k, v in last.rewards.items()},
                    "advantage": last.advantages[i],
                }
                f.write(json.dumps(rec) + "\n")


def grpo_parts(
    prompts: Sequence[Prompt],
    rewards: Rewards,
    tokenizer: Any,
    *,
    grpo: GRPOConfig,
    config: TrainConfig,
    max_prompt_length: int,
    stop_tokens: Sequence[int],
    reference: str | None,
    reference_model: Any = None,
    mesh: Mesh | None = None,
    compute_dtype: Any = None,
    pad_id: int = 0,
) -> tuple[PromptSource, Rollout, GRPOLoss]:
    """The prompt source, the rollout and the loss of a GRPO run on ``config``'s mesh (a
    step's ``batch_size * grad_accum`` rows are completions, ``num_generations`` per prompt).

    Raises:
        ValueError: the rows are not whole groups, or a group would straddle processes.
    """
    rows = config.batch_size * config.grad_accum
    if rows % grpo.num_generations:
        raise ValueError(
            f"--batch-size × --grad-accum = {rows} completions per step are not whole groups "
            f"of --num-generations {grpo.num_generations}; make it a multiple."
        )
    mesh = make_mesh(config.mesh) if mesh is None else mesh  # as the loop lays the run out
    rules = make_rules(config.sharding)
    source = PromptSource(
        prompts,
        num_generations=grpo.num_generations,
        max_prompt_length=max_prompt_length,
        seed=config.seed,
        pad_id=pad_id,
    )
    rollout = Rollout(
        grpo,
        source,
        rewards,
        tokenizer,
        layout=BatchLayout(mesh, rules, rows),
        rules=rules,
        stop_tokens=stop_tokens,
        seed=config.seed,
        reference=reference,
        reference_model=reference_model,
        compute_dtype=compute_dtype,
    )
    loss = GRPOLoss(
        grpo,
        reference=reference,
        compute_dtype=compute_dtype,
        reward_names=rewards.names,
        reward_weights=rewards.weights,
    )
    return source, rollout, loss
