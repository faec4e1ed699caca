"""``GRPOConfig``: GRPO's sampling, rewards and loss, under TRL's ``GRPOConfig`` names and
defaults, declared once as settings (the library's config and the command line's ``[grpo]``
table alike). No JAX here."""

from __future__ import annotations

import dataclasses
from typing import Any, Literal

from ._fields import setting

#: How the per-token losses of a batch are averaged (TRL's ``loss_type``):
#: ``grpo``: each completion's token mean, then the mean over completions;
#: ``dr_grpo``: the sum over every token divided by ``completions × max_completion_length``;
#: ``dapo``: the sum over every token divided by the number of completion tokens.
LOSS_TYPES = ("grpo", "dr_grpo", "dapo")
#: How advantages are scaled (TRL's ``scale_rewards``): by the group's standard deviation, the
#: batch's, or not at all.
SCALINGS = ("group", "batch", "none")

#: The fields that make a GRPO run what it is, recorded with the run (:meth:`GRPOConfig.to_dict`).
_RECORDED = (
    "num_generations",
    "max_completion_length",
    "temperature",
    "top_p",
    "beta",
    "epsilon",
    "epsilon_high",
    "loss_type",
    "num_iterations",
    "scale_rewards",
)


@dataclasses.dataclass(frozen=True)
class GRPOConfig:
    """Group relative policy optimisation (Shao et al. 2024), as TRL's ``GRPOTrainer`` runs it.

    Attributes:
        num_generations: completions sampled per prompt (a group), at least 2.
        max_completion_length: new tokens per completion at most.
        temperature: sampling temperature; the log-probabilities that are trained are those of
            the logits divided by it, as sampled.
        top_p: nucleus sampling mass (1: off).
        beta: weight of the KL to the reference; 0 skips the reference altogether (the command
            line's ``--beta``).
        epsilon: lower clipping range of the probability ratio (``1 - epsilon``).
        epsilon_high: upper clipping range (``1 + epsilon_high``; ``None``: ``epsilon``, see
            :attr:`upper_epsilon`).
        loss_type: one of :data:`LOSS_TYPES`.
        num_iterations: updates taken on each batch of rollouts (μ); past the first they are
            off-policy and the ratio is to the log-probabilities the batch was sampled with.
        scale_rewards: one of :data:`SCALINGS`.
        reward, reward_weights, reward_timeout, max_prompt_length, long_prompts, sample_every:
            what the command line reads the prompts and rewards with (a reward call's limit in
            seconds), and how often it writes sample completions.
    """

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
        identity=False,
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
    beta: float = setting(0.0, "weight of the KL to the reference", hidden=True)
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
        flag="--sample-every", metavar="N", within="[0, inf)", identity=False,
    )  # fmt: skip

    def __post_init__(self) -> None:
        checks = [
            ("loss_type", self.loss_type in LOSS_TYPES, f"one of {', '.join(LOSS_TYPES)}"),
            ("scale_rewards", self.scale_rewards in SCALINGS, f"one of {', '.join(SCALINGS)}"),
            ("num_generations", self.num_generations >= 2, "at least 2 (a group)"),
            ("max_completion_length", self.max_completion_length >= 1, "at least 1"),
            ("temperature", self.temperature > 0, "positive"),
            ("top_p", 0 < self.top_p <= 1, "in (0, 1]"),
            ("beta", self.beta >= 0, "0 or more"),
            ("epsilon", self.epsilon >= 0, "0 or more"),
            ("epsilon_high", self.upper_epsilon >= 0, "0 or more"),
            ("num_iterations", self.num_iterations >= 1, "at least 1"),
        ]
        for name, ok, wanted in checks:
            if not ok:
                flag = "--" + name.replace("_", "-")
                raise ValueError(f"{flag} must be {wanted}, got {getattr(self, name)!r}.")

    @property
    def upper_epsilon(self) -> float:
        """The upper clipping range: ``epsilon_high``, or ``epsilon`` when it is ``None``."""
        return self.epsilon if self.epsilon_high is None else self.epsilon_high

    @property
    def on_policy(self) -> bool:
        """Whether every update is on the policy that sampled (one iteration): the ratio is
        then 1 and the old log-probabilities need not be computed."""
        return self.num_iterations == 1

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: what makes a GRPO run what it is (the clipping range resolved)."""
        out = {name: getattr(self, name) for name in _RECORDED}
        out["epsilon_high"] = self.upper_epsilon
        return out
