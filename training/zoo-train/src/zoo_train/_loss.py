"""The default language-model loss: masked next-token cross entropy plus optional z-loss, and
for mixture-of-experts models the routers' load-balancing loss and z-loss.

A model with ``hidden_and_head`` (every zoo model) never hands the loss its logits: the loss
asks the model's output head for the summed, mask-weighted cross entropy and z-loss, through
the fused linear cross-entropy contract of zoo-attention (``fused_xla`` by default everywhere,
its gradients computed in the forward pass; ``ZOO_CROSS_ENTROPY=logits`` brings the plain
logits back). Preference and GRPO log-probabilities take each token's cross entropy
(``model_token_losses``). Any other Equinox model returning logits from ``__call__`` is scored
from its logits.

A loss function has the signature ``loss_fn(model, batch, key) -> (loss_sum, aux)``: ``loss_sum``
is a float32 scalar *summed* over the counted units and ``aux`` a dict of scalars that must hold
``"weight"`` (how many units were counted). The train step divides by the total weight over all
micro-batches, so gradient accumulation equals the large-batch token mean exactly. The other
``aux`` entries are sums too and are reported divided by the weight. What the weight counts is
the loss's ``unit`` attribute (:func:`loss_unit`): tokens unless it says otherwise (a
preference loss counts pairs).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, PyTree

from zoo_attention.cross_entropy import token_losses as token_losses

from ._precision import cast_floating

LossFn = Callable[[PyTree, dict[str, jax.Array], jax.Array], tuple[jax.Array, dict[str, jax.Array]]]


def loss_unit(loss_fn: LossFn) -> str:
    """What ``aux["weight"]`` of ``loss_fn`` counts: its ``unit`` attribute, else ``"tokens"``."""
    return str(getattr(loss_fn, "unit", "tokens"))


def model_token_losses(
    model: PyTree, batch: dict[str, jax.Array], **inputs: Any
) -> tuple[Float[Array, "B T"], Float[Array, "B T"], Any]:
    """``(ce, log_z, router_stats)`` of ``batch["targets"]`` after ``batch["input_ids"]``,
    float32 ``[B, T]`` (0 where ``batch["loss_mask"]`` is 0), through the fused cross-entropy
    contract for a model with ``hidden_and_head``, else from its logits; ``router_stats`` for
    a mixture-of-experts model (``None`` otherwise). ``inputs`` go to the model (positions,
    segment ids, a dropout key)."""
    mask = batch["loss_mask"]
    if callable(getattr(model, "hidden_and_head", None)):
        hidden, head, stats = model.hidden_and_head(batch["input_ids"], **inputs)
        ce, log_z = head.cross_entropy(hidden, batch["targets"], loss_mask=mask)
        return ce, log_z, stats
    stats = None
    if callable(getattr(model, "logits_and_router", None)):
        logits, stats = model.logits_and_router(batch["input_ids"], **inputs)
    else:
        logits = model(batch["input_ids"], **inputs)
    ce, log_z = token_losses(logits, batch["targets"])
    counts = mask != 0
    return jnp.where(counts, ce, 0.0), jnp.where(counts, log_z, 0.0), stats


def model_loss_sums(
    model: PyTree, batch: dict[str, jax.Array], z_loss: float, **inputs: Any
) -> tuple[jax.Array, jax.Array, jax.Array, Any]:
    """``(loss_sum, ce_sum, z_sum, router_stats)`` of ``batch["targets"]`` after
    ``batch["input_ids"]``, each token weighted by ``batch["loss_mask"]``: ``ce_sum = Σ w ce``,
    ``z_sum = Σ w log_z²`` and ``loss_sum = ce_sum + z_loss · z_sum`` (float32 scalars; the
    two sums carry no gradient). A model with ``hidden_and_head`` goes through the contract's
    summed loss (whose fused kernel computes the gradients in the forward pass); any other is
    scored from its logits."""
    mask = batch["loss_mask"].astype(jnp.float32)
    if callable(getattr(model, "hidden_and_head", None)):
        hidden, head, stats = model.hidden_and_head(batch["input_ids"], **inputs)
        loss, metrics = head.cross_entropy_loss(
            hidden, batch["targets"], weights=mask, z_loss=z_loss
        )
        return loss, metrics["ce"], metrics["log_z_squared"], stats
    ce, log_z, stats = model_token_losses(model, batch, **inputs)
    ce_sum = jnp.sum(ce * mask)
    z_sum = jnp.sum(jnp.square(log_z) * mask)
    loss = ce_sum + z_loss * z_sum
    return loss, jax.lax.stop_gradient(ce_sum), jax.lax.stop_gradient(z_sum), stats


def _takes_key(model: object) -> bool:
    # Models with dropout (zoo_models) take ``key=``; passing it turns dropout on in training.
    try:
        return "key" in inspect.signature(type(model).__call__).parameters
    except (TypeError, ValueError):
        return False


#: The aux entry of a mixture-of-experts model whose routers balance without a loss
#: (``config.router_bias_update_speed``): the step's assignments per expert ``[L, E]``, which
#: the train step hands to ``model.balance_routers`` after the update. Not a metric.
ROUTER_COUNTS = "router_counts"

#: Prefix of the expert load metrics: ``experts/busiest/L`` and ``experts/idlest/L`` are the
#: shares of layer ``L``'s assignments that its busiest and idlest expert received, and
#: ``experts/even`` the share of each when the load is even (``1 / E``).
EXPERT_LOAD = "experts"


def _router_terms(
    stats: Any, weight: jax.Array, aux_weight: float, z_weight: float
) -> tuple[jax.Array, dict[str, jax.Array]]:
    """The routers' losses, as sums over the counted tokens (``weight`` of them), and their
    metrics: the load-balancing loss and z-loss, and each layer's busiest and idlest expert."""
    aux, z = stats.aux_loss(), stats.z_loss()
    load = stats.load()  # [L, E]
    metrics = {
        "moe_aux_loss": aux * weight,
        "moe_z_loss": z * weight,
        f"{EXPERT_LOAD}/even": weight / stats.num_experts,
    }
    for i, (busiest, idlest) in enumerate(zip(load.max(-1), load.min(-1), strict=True)):
        metrics[f"{EXPERT_LOAD}/busiest/{i}"] = busiest * weight
        metrics[f"{EXPERT_LOAD}/idlest/{i}"] = idlest * weight
    return weight * (aux_weight * aux + z_weight * z), metrics


def make_lm_loss(
    *,
    z_loss: float = 0.0,
    compute_dtype: jnp.dtype | str | None = None,
    router_aux_loss: float | None = None,
    router_z_loss: float = 0.0,
    balance_routers: bool = True,
) -> LossFn:
    """The LM loss for a model with ``hidden_and_head`` (zoo models: the fused cross-entropy
    contract), or ``model(input_ids, *, positions, segment_ids) -> logits [B,T,V]``.

    Args:
        z_loss: weight of ``log(Z)²`` per counted token (stabilises the softmax normaliser).
        compute_dtype: cast floating parameters to this dtype for the forward pass (``None``: as
            stored). Logits are upcast to float32 for the loss.
        router_aux_loss: for a mixture-of-experts model (one with ``logits_and_router``, as
            zoo models have), the weight of the load-balancing loss of its routers, computed as
            ``transformers`` does over the micro-batch; ``None``: its config's
            ``router_aux_loss`` (``router_aux_loss_coef`` when ``output_router_logits`` is
            on, as ``transformers`` trains).
        router_z_loss: the weight of the routers' z-loss.
        balance_routers: hand the step the experts' load (:data:`ROUTER_COUNTS`) when the
            model's routers balance without a loss (``config.router_bias_update_speed``), so
            the train step moves their correction biases; ``False`` keeps them as they are (a
            LoRA run, whose adapters must carry every change to the base).

    The step's RNG key is passed as ``key=`` when the model's ``__call__`` takes one (dropout).

    Returns:
        ``loss_fn(model, batch, key)``; ``batch`` holds ``input_ids``, ``targets``,
        ``positions``, ``segment_ids`` (int ``[B, T]``) and ``loss_mask`` (float ``[B, T]``).
        ``aux`` holds ``weight`` (counted tokens), ``ce`` and ``z_loss`` (sums); for a
        mixture-of-experts model also ``moe_aux_loss``, ``moe_z_loss``, ``experts/even`` and,
        per expert layer ``L``, ``experts/busiest/L`` and ``experts/idlest/L``, each times the
        weight (the
        routers' figures are per micro-batch; the loss adds ``weight x (router_aux_loss x
        aux + router_z_loss x z)``, so a step's gradient weighs micro-batches by their tokens).
    """
    dtype = None if compute_dtype is None else jnp.dtype(compute_dtype)

    def loss_fn(
        model: PyTree, batch: dict[str, jax.Array], key: jax.Array
    ) -> tuple[jax.Array, dict[str, jax.Array]]:
        kwargs = {"key": key} if _takes_key(model) else {}
        if dtype is not None:
            model = cast_floating(model, dtype)
        inputs = {"positions": batch["positions"], "segment_ids": batch["segment_ids"], **kwargs}
        loss, ce_sum, z_sum, stats = model_loss_sums(model, batch, z_loss, **inputs)
        weight = jnp.sum(batch["loss_mask"].astype(jnp.float32))
        aux = {"weight": weight, "ce": ce_sum, "z_loss": z_loss * z_sum}
        if stats is not None:
            aux_weight = router_aux_loss
            if aux_weight is None:
                aux_weight = float(getattr(model.config, "router_aux_loss", 0.0))
            router_sum, metrics = _router_terms(stats, weight, aux_weight, router_z_loss)
            loss = loss + router_sum
            aux.update(metrics)
            speed = float(getattr(model.config, "router_bias_update_speed", 0.0))
            if balance_routers and speed > 0:
                aux[ROUTER_COUNTS] = stats.counts
        return loss, aux

    return loss_fn
