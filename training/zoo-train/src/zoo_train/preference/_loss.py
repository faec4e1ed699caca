"""The preference loss: the loss contract (:mod:`zoo_train._loss`) over pairs."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from jaxtyping import Array, PyTree

from ..peft import without_adapters
from ._logps import side_sums, token_logps
from ._objectives import PreferenceConfig, pair_objective

#: Where the reference log-probabilities come from.
REFERENCES = ("adapters", "batch", None)


class PreferenceLoss:
    """``loss_fn(model, batch, key) -> (loss_sum, aux)`` of a preference objective on packed
    pairs: ``loss_sum`` summed over the batch's pairs, ``aux["weight"]`` the number of pairs and
    every metric of :func:`pair_objective` summed over them (the step reports their means).

    Args:
        config: the objective.
        reference: ``"adapters"``: the model itself with its LoRA adapters switched off (no
            second copy of the weights); ``"batch"``: the batch's ``ref_logps`` (computed once
            before training, :func:`reference_logps`); ``None`` for SimPO and ORPO.
        compute_dtype: cast floating parameters to this for the forward passes.

    A pair counts when both its sides have a response token in the batch.
    """

    unit = "pairs"  # what aux["weight"] counts (records say "pairs", not "tokens")

    def __init__(
        self,
        config: PreferenceConfig,
        *,
        reference: str | None,
        compute_dtype: jnp.dtype | str | None = None,
    ) -> None:
        if reference not in REFERENCES:
            raise ValueError(f"`reference` must be one of {REFERENCES}, got {reference!r}.")
        if config.needs_reference and reference is None:
            raise ValueError(f"{config.objective} needs a reference: 'adapters' or 'batch'.")
        self.config = config
        self.reference = reference if config.needs_reference else None
        self.compute_dtype = None if compute_dtype is None else jnp.dtype(compute_dtype)

    @property
    def extra_inputs(self) -> dict[str, str]:
        """The batch fields it reads besides those of packed rows, with their dtypes: the
        reference log-probabilities ``ref_logps`` ``[B, T]`` with ``reference="batch"``."""
        return {"ref_logps": "float32"} if self.reference == "batch" else {}

    def __call__(
        self, model: PyTree, batch: dict[str, Array], key: Any
    ) -> tuple[Array, dict[str, Array]]:
        segments = batch["segment_ids"]
        logps = side_sums(token_logps(model, batch, self.compute_dtype), segments)
        lengths = side_sums(batch["loss_mask"].astype(jnp.float32), segments)
        reference = None
        if self.reference == "adapters":
            base = token_logps(without_adapters(model), batch, self.compute_dtype)
            reference = side_sums(jax.lax.stop_gradient(base), segments)
        elif self.reference == "batch":
            reference = side_sums(batch["ref_logps"].astype(jnp.float32), segments)
        counted = (lengths[0] > 0) & (lengths[1] > 0)
        loss, metrics = pair_objective(self.config, logps, lengths, reference)
        aux = {"weight": jnp.sum(counted.astype(jnp.float32))}
        for name, value in metrics.items():
            aux[name] = jnp.sum(jnp.where(counted, value, 0.0))
        return jnp.sum(jnp.where(counted, loss, 0.0)), aux
