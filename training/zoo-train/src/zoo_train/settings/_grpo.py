"""``[grpo]``: the settings of ``zoo finetune --objective grpo``, under TRL's names."""

from __future__ import annotations

import dataclasses
from typing import Literal

from ._fields import setting


@dataclasses.dataclass(frozen=True)
class GRPOSettings:
    """``[grpo]``: GRPO's sampling, rewards and loss, under TRL's names (``--beta`` is the KL
    weight)."""

    reward: list[str] = setting(
        [],
        "reward functions: module:function, path/to/file.py:function, or answer_match, "
        "format_match, length_penalty",
        flag="--reward",
        nargs="+",
        metavar="FN",
    )
    reward_weights: list[float] = setting(
        [], "each reward function's weight (empty: 1 each)", flag="--reward-weights",
        nargs="+", metavar="W", within="(-inf, inf)",
    )  # fmt: skip
    reward_timeout: float = setting(
        600.0,
        "seconds one call of a reward function from a module or file may take; past them the "
        "run stops (exit 2) with its last checkpoint kept",
        flag="--reward-timeout",
        metavar="S",
        within="(0, inf)",
        later=True,
    )
    num_generations: int = setting(
        8, "completions sampled per prompt", flag="--num-generations", metavar="G",
        within="[2, inf)",
    )  # fmt: skip
    max_prompt_length: int = setting(
        256, "prompt tokens at most", flag="--max-prompt-length", metavar="N", within="[1, inf)"
    )
    long_prompts: Literal["refuse", "cut"] = setting(
        "refuse",
        "a prompt longer than max_prompt_length: refuse (naming its line) or cut its first tokens",
        flag="--long-prompts",
        metavar="{refuse,cut}",
    )
    max_completion_length: int = setting(
        256, "new tokens per completion at most", flag="--max-completion-length", metavar="N",
        within="[1, inf)",
    )  # fmt: skip
    temperature: float = setting(
        1.0, "sampling temperature", flag="--temperature", metavar="T", within="(0, inf)"
    )
    top_p: float = setting(1.0, "nucleus sampling mass", flag="--top-p", metavar="P",
                           within="(0, 1]")  # fmt: skip
    epsilon: float = setting(
        0.2, "lower clipping range of the ratio", flag="--epsilon", metavar="E", within="[0, inf)"
    )
    epsilon_high: float | None = setting(
        None, "upper clipping range (none: epsilon)", flag="--epsilon-high", metavar="E",
        within="[0, inf)",
    )  # fmt: skip
    loss_type: Literal["grpo", "dr_grpo", "dapo"] = setting(
        "dapo",
        "how per-token losses are averaged",
        flag="--loss-type",
        metavar="{grpo,dr_grpo,dapo}",
    )
    num_iterations: int = setting(
        1, "updates on each batch of rollouts", flag="--num-iterations", metavar="N",
        within="[1, inf)",
    )  # fmt: skip
    scale_rewards: Literal["group", "batch", "none"] = setting(
        "group", "divide advantages by the group's or the batch's reward std, or not",
        flag="--scale-rewards", metavar="{group,batch,none}",
    )  # fmt: skip
    sample_every: int = setting(
        10, "write sample completions with their rewards every N steps (0: never)",
        flag="--sample-every", metavar="N", within="[0, inf)",
    )  # fmt: skip
