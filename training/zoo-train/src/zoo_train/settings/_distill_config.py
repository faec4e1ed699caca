"""``DistillConfig``: knowledge distillation's divergence, under TRL's ``GKDConfig`` names,
declared once as settings (the library's config and the command line's ``[distill]`` table
alike). No JAX here."""

from __future__ import annotations

import dataclasses
from typing import Any

from ._fields import check, setting


@dataclasses.dataclass(frozen=True)
class DistillConfig:
    """The divergence a student minimises towards its teacher's next-token distributions, on
    each response token (Agarwal et al. 2024, "On-policy distillation of language models", as
    TRL's ``GKDTrainer.generalized_jsd_loss`` computes it).

    Attributes:
        beta: interpolation of the generalized Jensen-Shannon divergence: 0 is the forward KL
            (teacher to student, mode covering), 1 the reverse KL (student to teacher, mode
            seeking); the command line's ``--beta``.
        temperature: both models' logits are divided by it before the softmax.
    """

    beta: float = setting(0.5, "interpolation between forward (0) and reverse (1) KL",
                          within="[0, 1]", hidden=True)  # fmt: skip
    temperature: float = setting(
        1.0,
        "softmax temperature of the student's and the teacher's logits in the divergence",
        flag="--distill-temperature",
        metavar="T",
        within="(0, inf)",
        later=True,
    )

    def __post_init__(self) -> None:
        check(self, "distill.")

    @property
    def divergence(self) -> str:
        """``forward KL``, ``reverse KL`` or ``generalized JSD (beta 0.5)``."""
        if self.beta == 0:
            return "forward KL"
        if self.beta == 1:
            return "reverse KL"
        return f"generalized JSD (beta {self.beta:g})"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return dataclasses.asdict(self)
