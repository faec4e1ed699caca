"""GRPO's settings, under TRL's ``GRPOConfig`` names and defaults."""

from __future__ import annotations

import dataclasses
from typing import Any

#: How the per-token losses of a batch are averaged (TRL's ``loss_type``):
#: ``grpo``: each completion's token mean, then the mean over completions;
#: ``dr_grpo``: the sum over every token divided by ``completions × max_completion_length``;
#: ``dapo``: the sum over every token divided by the number of completion tokens.
LOSS_TYPES = ("grpo", "dr_grpo", "dapo")
#: How advantages are scaled (TRL's ``scale_rewards``): by the group's standard deviation, the
#: batch's, or not at all.
SCALINGS = ("group", "batch", "none")


@dataclasses.dataclass(frozen=True)
class GRPOConfig:
    """Group relative policy optimisation (Shao et al. 2024), as TRL's ``GRPOTrainer`` runs it.

    Attributes:
        num_generations: completions sampled per prompt (a group), at least 2.
        max_completion_length: new tokens per completion at most.
        temperature: sampling temperature; the log-probabilities that are trained are those of
            the logits divided by it, as sampled.
        top_p: nucleus sampling mass (1: off).
        beta: weight of the KL to the reference; 0 skips the reference altogether.
        epsilon: lower clipping range of the probability ratio (``1 - epsilon``).
        epsilon_high: upper clipping range (``1 + epsilon_high``; ``None``: ``epsilon``).
        loss_type: one of :data:`LOSS_TYPES`.
        num_iterations: updates taken on each batch of rollouts (μ); past the first they are
            off-policy and the ratio is to the log-probabilities the batch was sampled with.
        scale_rewards: one of :data:`SCALINGS`.
    """

    num_generations: int = 8
    max_completion_length: int = 256
    temperature: float = 1.0
    top_p: float = 1.0
    beta: float = 0.0
    epsilon: float = 0.2
    epsilon_high: float | None = None
    loss_type: str = "dapo"
    num_iterations: int = 1
    scale_rewards: str = "group"

    def __post_init__(self) -> None:
        if self.epsilon_high is None:
            object.__setattr__(self, "epsilon_high", self.epsilon)
        checks = [
            ("loss_type", self.loss_type in LOSS_TYPES, f"one of {', '.join(LOSS_TYPES)}"),
            ("scale_rewards", self.scale_rewards in SCALINGS, f"one of {', '.join(SCALINGS)}"),
            ("num_generations", self.num_generations >= 2, "at least 2 (a group)"),
            ("max_completion_length", self.max_completion_length >= 1, "at least 1"),
            ("temperature", self.temperature > 0, "positive"),
            ("top_p", 0 < self.top_p <= 1, "in (0, 1]"),
            ("beta", self.beta >= 0, "0 or more"),
            ("epsilon", self.epsilon >= 0, "0 or more"),
            ("epsilon_high", self.epsilon_high >= 0, "0 or more"),  # type: ignore[operator]
            ("num_iterations", self.num_iterations >= 1, "at least 1"),
        ]
        for name, ok, wanted in checks:
            if not ok:
                flag = "--" + name.replace("_", "-")
                raise ValueError(f"{flag} must be {wanted}, got {getattr(self, name)!r}.")

    @property
    def on_policy(self) -> bool:
        """Whether every update is on the policy that sampled (one iteration): the ratio is
        then 1 and the old log-probabilities need not be computed."""
        return self.num_iterations == 1

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return dataclasses.asdict(self)
