"""The four preference objectives, per pair, from the sides' log-probabilities.

Each takes, per pair, the policy's summed log-probability of the chosen and rejected responses
(``logps``), their lengths in response tokens, and for DPO and IPO the reference's summed
log-probabilities, and gives the pair's loss and the metrics TRL logs under the same names:

- ``dpo`` (Rafailov et al. 2023): ``-log σ(β ((π_c − ref_c) − (π_r − ref_r)))``;
- ``ipo`` (Azar et al. 2023, Eq. 17), as TRL computes it: ``(h − 1/(2β))²`` with ``h`` the
  difference of the per-token log-ratios ``(π_c − ref_c)/|y_c| − (π_r − ref_r)/|y_r|``;
- ``simpo`` (Meng et al. 2024): ``-log σ(β (π_c/|y_c| − π_r/|y_r|) − γ)``, no reference;
- ``orpo`` (Hong et al. 2024): ``-π_c/|y_c| − β log σ(log odds)``, where the log odds compare
  ``p = exp(π/|y|)`` of the sides, ``log(p_c/(1−p_c)) − log(p_r/(1−p_r))``; no reference.

Rewards are ``β (π − ref)`` for DPO and IPO and ``β π/|y|`` for SimPO and ORPO; ``logps/*`` are
the log-probabilities the objective uses (sums for DPO and IPO, per-token means for the others),
as TRL reports them.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

OBJECTIVES = ("dpo", "ipo", "simpo", "orpo")
#: β when none is given: TRL's defaults, and SimPO's paper's (TRL's 0.1 is its CPO default).
DEFAULT_BETA = {"dpo": 0.1, "ipo": 0.1, "simpo": 2.0, "orpo": 0.1}
#: Metrics every objective reports (summed over pairs in a batch, shown as means).
METRICS = (
    "rewards/chosen",
    "rewards/rejected",
    "rewards/accuracies",
    "rewards/margins",
    "logps/chosen",
    "logps/rejected",
)


@dataclasses.dataclass(frozen=True)
class PreferenceConfig:
    """A preference objective.

    Attributes:
        objective: ``dpo``, ``ipo``, ``simpo`` or ``orpo``.
        beta: ``β`` (``None``: :data:`DEFAULT_BETA` of the objective).
        simpo_gamma: SimPO's target margin ``γ``.
    """

    objective: str = "dpo"
    beta: float | None = None
    simpo_gamma: float = 0.5

    def __post_init__(self) -> None:
        if self.objective not in OBJECTIVES:
            raise ValueError(
                f"Unknown preference objective {self.objective!r}; choose from "
                f"{', '.join(OBJECTIVES)}."
            )
        if self.beta is None:
            object.__setattr__(self, "beta", DEFAULT_BETA[self.objective])
        if not self.beta > 0:  # type: ignore[operator]
            raise ValueError(f"--beta must be positive, got {self.beta}.")

    @property
    def needs_reference(self) -> bool:
        """Whether the objective compares with a reference model (DPO and IPO)."""
        return self.objective in ("dpo", "ipo")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return dataclasses.asdict(self)


def _log1mexp(x: Array) -> Array:
    """``log(1 − exp(x))`` for ``x < 0``, accurate at both ends."""
    x = jnp.minimum(x, -1e-12)  # a side the model is certain of: finite, not -inf
    return jnp.where(x > -0.6931472, jnp.log(-jnp.expm1(x)), jnp.log1p(-jnp.exp(x)))


def pair_objective(
    config: PreferenceConfig,
    logps: tuple[Float[Array, "*P"], Float[Array, "*P"]],
    lengths: tuple[Float[Array, "*P"], Float[Array, "*P"]],
    reference: tuple[Float[Array, "*P"], Float[Array, "*P"]] | None,
) -> tuple[Float[Array, "*P"], dict[str, Float[Array, "*P"]]]:
    """Each pair's loss and metrics (``*P``: any shape of pairs), float32.

    Args:
        logps: the policy's summed log-probabilities of the chosen and rejected responses.
        lengths: their lengths in response tokens (at least 1 where a pair is counted).
        reference: the reference's summed log-probabilities (DPO and IPO).
    """
    beta = float(config.beta)  # type: ignore[arg-type]
    chosen, rejected = logps
    n_c, n_r = (jnp.maximum(n, 1.0) for n in lengths)
    metrics: dict[str, Array] = {}
    if config.needs_reference:
        if reference is None:
            raise ValueError(f"{config.objective} needs the reference model's log-probabilities.")
        ratio_c, ratio_r = chosen - reference[0], rejected - reference[1]
        if config.objective == "dpo":
            loss = -jax.nn.log_sigmoid(beta * (ratio_c - ratio_r))
        else:
            loss = jnp.square(ratio_c / n_c - ratio_r / n_r - 1.0 / (2.0 * beta))
        reward_c, reward_r = beta * ratio_c, beta * ratio_r
        shown_c, shown_r = chosen, rejected
    else:
        mean_c, mean_r = chosen / n_c, rejected / n_r
        if config.objective == "simpo":
            loss = -jax.nn.log_sigmoid(beta * (mean_c - mean_r - config.simpo_gamma / beta))
        else:
            log_odds = (mean_c - mean_r) - (_log1mexp(mean_c) - _log1mexp(mean_r))
            ratio = jax.nn.log_sigmoid(log_odds)
            loss = -mean_c - beta * ratio
            metrics.update(
                {"nll_loss": -mean_c, "log_odds_ratio": ratio, "log_odds_chosen": log_odds}
            )
        reward_c, reward_r = beta * mean_c, beta * mean_r
        shown_c, shown_r = mean_c, mean_r
    metrics.update(
        {
            "rewards/chosen": reward_c,
            "rewards/rejected": reward_r,
            "rewards/accuracies": (reward_c > reward_r).astype(jnp.float32),
            "rewards/margins": reward_c - reward_r,
            "logps/chosen": shown_c,
            "logps/rejected": shown_r,
        }
    )
    return loss, metrics
