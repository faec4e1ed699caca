"""The GRPO loss: clipped, advantage-weighted probability ratios per completion token, plus
β times a KL estimate to the reference, averaged as ``loss_type`` says; under the loss contract
(:mod:`zoo_train._loss`), so the step factory trains it unchanged.

Per token, with ``r = exp(logp - old_logp)`` and ``A`` the completion's advantage,
``-min(r A, clip(r, 1 - ε, 1 + ε_high) A) + β (exp(ref - logp) - (ref - logp) - 1)``
(Shao et al. 2024; the KL is Schulman's k3 estimator), exactly as TRL 1.16's ``GRPOTrainer``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, PyTree

from .._loss import token_losses
from .._precision import cast_floating
from ..peft import without_adapters
from ..settings import GRPOConfig

#: Where the reference log-probabilities come from.
REFERENCES = ("adapters", "batch", None)
#: Metrics the loss reports, under TRL's names: token means over the completion tokens (``kl``
#: with ``beta > 0``, ``entropy``, ``clip_ratio/*``), and of the rollouts (``reward``,
#: ``reward_std``, ``completions/*``, and ``rewards/<fn>/mean`` per reward function).
METRICS = (
    "kl",
    "entropy",
    "clip_ratio/low_mean",
    "clip_ratio/high_mean",
    "clip_ratio/region_mean",
    "reward",
    "reward_std",
    "completions/mean_length",
    "completions/clipped_ratio",
)


def policy_objective(
    config: GRPOConfig,
    logps: Float[Array, "B L"],
    advantages: Float[Array, " B"],
    mask: Float[Array, "B L"],
    *,
    old_logps: Float[Array, "B L"] | None = None,
    ref_logps: Float[Array, "B L"] | None = None,
) -> tuple[Float[Array, ""], Float[Array, ""], dict[str, Float[Array, "B L"]]]:
    """``(loss_sum, weight, per_token)``: the loss summed so that ``loss_sum / weight`` is
    TRL's loss of ``config.loss_type`` on these rows, and per-token values for the metrics
    (``kl`` when ``beta > 0``, the clipped regions).

    Args:
        logps: the policy's log-probability of each completion token (0 where ``mask`` is 0).
        advantages: one per completion.
        mask: 1 on completion tokens, 0 on padding.
        old_logps: the log-probabilities the rows were sampled with (``None``: these very
            ones, detached: an on-policy update).
        ref_logps: the reference's; required when ``config.beta > 0``.
    """
    mask = mask.astype(jnp.float32)
    old = jax.lax.stop_gradient(logps) if old_logps is None else old_logps
    ratio = jnp.exp(logps - old)
    adv = advantages[:, None].astype(jnp.float32)
    eps_low, eps_high = config.epsilon, config.upper_epsilon
    clipped = jnp.clip(ratio, 1.0 - eps_low, 1.0 + eps_high)
    per_token = -jnp.minimum(ratio * adv, clipped * adv)
    stats: dict[str, Array] = {}
    if config.beta != 0.0:
        if ref_logps is None:
            raise ValueError("beta > 0 needs the reference's log-probabilities.")
        delta = ref_logps - logps
        kl = jnp.exp(delta) - delta - 1.0
        per_token = per_token + config.beta * kl
        stats["kl"] = kl
    low = ((ratio < 1.0 - eps_low) & (adv < 0)).astype(jnp.float32)
    high = ((ratio > 1.0 + eps_high) & (adv > 0)).astype(jnp.float32)
    stats.update(
        {
            "clip_ratio/low_mean": low,
            "clip_ratio/high_mean": high,
            "clip_ratio/region_mean": jnp.maximum(low, high),
        }
    )
    masked = per_token * mask
    rows = jnp.float32(mask.shape[0])
    if config.loss_type == "grpo":
        loss_sum = jnp.sum(jnp.sum(masked, -1) / jnp.maximum(jnp.sum(mask, -1), 1.0))
        weight = rows
    elif config.loss_type == "dr_grpo":
        loss_sum, weight = jnp.sum(masked), rows * config.max_completion_length
    else:  # dapo
        loss_sum, weight = jnp.sum(masked), jnp.sum(mask)
    return loss_sum, weight, stats


def completion_logps(
    model: PyTree, batch: dict[str, Array], temperature: float, compute_dtype: Any = None
) -> tuple[Float[Array, "B T"], Float[Array, "B T"]]:
    """``(logps, entropy)`` of each target under ``model`` with its logits divided by
    ``temperature`` (as they were sampled), float32 ``[B, T]``; ``entropy`` is detached. No
    dropout key: the policy is compared with itself and its reference deterministically."""
    if compute_dtype is not None:
        model = cast_floating(model, compute_dtype)
    inputs = {"positions": batch["positions"], "segment_ids": batch["segment_ids"]}
    if callable(getattr(model, "hidden_and_head", None)):
        # The fused cross-entropy contract: never the batch's logits at once.
        hidden, head, _ = model.hidden_and_head(batch["input_ids"], **inputs)
        ce, _ = head.cross_entropy(hidden, batch["targets"], temperature=temperature)
        return -ce, head.entropy(hidden, temperature=temperature)
    logits = model(batch["input_ids"], **inputs)
    logits = logits.astype(jnp.float32) / temperature
    ce, _ = token_losses(logits, batch["targets"])
    detached = jax.lax.stop_gradient(logits)
    probs = jax.nn.softmax(detached, axis=-1)
    entropy = jax.nn.logsumexp(detached, axis=-1) - jnp.sum(probs * detached, axis=-1)
    return -ce, entropy


def _token_mean(values: Array, mask: Array) -> Array:
    return jnp.sum(values * mask) / jnp.maximum(jnp.sum(mask), 1.0)


def rollout_metrics(
    batch: dict[str, Array], names: Sequence[str], weights: Sequence[float]
) -> dict[str, Array]:
    """TRL's rollout metrics of a batch's rows: the mean and sample standard deviation of the
    combined reward over the completions some function scored, each function's mean over
    those it scored, the mean completion length and the share cut at the length limit."""
    mask = batch["loss_mask"].astype(jnp.float32)
    out = {
        "completions/mean_length": jnp.mean(jnp.sum(mask, -1)),
        "completions/clipped_ratio": jnp.mean(batch["truncated"].astype(jnp.float32)),
    }
    if "rewards" not in batch:
        return out
    rewards, scored = batch["rewards"], batch["reward_scored"]
    for j, name in enumerate(names):
        out[f"rewards/{name}/mean"] = _token_mean(rewards[:, j], scored[:, j])
    combined = jnp.sum(rewards * jnp.asarray(weights, jnp.float32)[None, :], -1)
    any_scored = (jnp.sum(scored, -1) > 0).astype(jnp.float32)
    count = jnp.sum(any_scored)
    mean = _token_mean(combined, any_scored)
    var = jnp.sum(jnp.square(combined - mean) * any_scored) / jnp.maximum(count - 1.0, 1.0)
    out["reward"] = mean
    out["reward_std"] = jnp.sqrt(var)
    return out


class GRPOLoss:
    """``loss_fn(model, batch, key) -> (loss_sum, aux)`` of GRPO on a batch of rollouts.

    The batch holds, per completion row: ``input_ids``, ``positions``, ``segment_ids``,
    ``targets`` and ``loss_mask`` ``[B, T]`` (the prompt then its completion; ``loss_mask`` 1
    on the completion's tokens), ``advantages`` ``[B]``, and when needed ``old_logps`` and
    ``ref_logps`` ``[B, T]`` (past the first iteration, and for a ``"batch"`` reference); and
    for the metrics ``rewards`` and ``reward_scored`` ``[B, F]`` (each function's reward, and
    1 where it gave one) and ``truncated`` ``[B]`` (:class:`~zoo_train.grpo.Rollout` makes it).

    ``aux`` holds ``weight`` (what ``loss_type`` divides by) and each of :data:`METRICS` times
    the weight, so the step reports their means over the micro-batch (over the batch when
    there is one micro-batch).

    Args:
        config: the GRPO settings.
        reference: ``"adapters"`` (the model with its LoRA adapters off), ``"batch"`` (the
            batch's ``ref_logps``), or ``None`` (with ``beta = 0``).
        compute_dtype: cast floating parameters to this for the forward passes.
        reward_names, reward_weights: the reward functions' names (for ``rewards/<fn>/mean``)
            and weights in the combined reward.
    """

    def __init__(
        self,
        config: GRPOConfig,
        *,
        reference: str | None,
        compute_dtype: Any = None,
        reward_names: Sequence[str] = (),
        reward_weights: Sequence[float] | None = None,
    ) -> None:
        if reference not in REFERENCES:
            raise ValueError(f"`reference` must be one of {REFERENCES}, got {reference!r}.")
        if config.beta > 0 and reference is None:
            raise ValueError("beta > 0 needs a reference: 'adapters' or 'batch'.")
        self.config = config
        self.reference = reference if config.beta > 0 else None
        self.compute_dtype = None if compute_dtype is None else jnp.dtype(compute_dtype)
        self.reward_names = tuple(reward_names)
        self.reward_weights = tuple(reward_weights or (1.0,) * len(self.reward_names))

    @property
    def unit(self) -> str:
        """What ``aux["weight"]`` counts."""
        return {"grpo": "completions", "dr_grpo": "token slots"}.get(
            self.config.loss_type, "tokens"
        )

    def __call__(
        self, model: PyTree, batch: dict[str, Array], key: Any
    ) -> tuple[Array, dict[str, Array]]:
        mask = batch["loss_mask"].astype(jnp.float32)
        logps, entropy = completion_logps(model, batch, self.config.temperature, self.compute_dtype)
        logps = logps * mask
        ref = None
        if self.reference == "adapters":
            base, _ = completion_logps(
                without_adapters(model), batch, self.config.temperature, self.compute_dtype
            )
            ref = jax.lax.stop_gradient(base * mask)
        elif self.reference == "batch":
            ref = batch["ref_logps"].astype(jnp.float32) * mask
        old = batch["old_logps"].astype(jnp.float32) * mask if "old_logps" in batch else None
        loss_sum, weight, stats = policy_objective(
            self.config, logps, batch["advantages"], mask, old_logps=old, ref_logps=ref
        )
        aux = {"weight": weight, "entropy": weight * _token_mean(entropy, mask)}
        for name, values in stats.items():
            aux[name] = weight * _token_mean(jax.lax.stop_gradient(values), mask)
        if "truncated" in batch:
            for name, value in rollout_metrics(
                batch, self.reward_names, self.reward_weights
            ).items():
                aux[name] = weight * value
        return loss_sum, aux
