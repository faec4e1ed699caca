"""Mixture-of-experts layers as the Llama-style families store them: the expert settings of
``config.json`` and the router and per-expert weights of a layer."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import jax
import numpy as np
from jaxtyping import Array

from .._config import ModelConfig
from .._hf_weights import Rule, array_module, one
from . import _decoder

__all__ = ["layer_rules", "read", "write"]


def read(hf: Mapping[str, Any], model_type: str, *, required: bool) -> dict[str, Any]:
    """The expert count and top-k (refused where the layer cannot have them), and the
    load-balancing settings."""
    count_key = "num_local_experts" if "num_local_experts" in hf else "num_experts"
    n, k = hf.get(count_key), hf.get("num_experts_per_tok")
    if not isinstance(n, int) or isinstance(n, bool) or n < (1 if required else 0):
        raise ValueError(
            f"{model_type} config.json has {count_key} {n!r}; a mixture of experts needs a "
            f"whole number of experts{', at least 1' if required else ''}."
        )
    if n and (not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= n):
        raise ValueError(
            f"{model_type} config.json has num_experts_per_tok {k!r} for {n} experts "
            f"({count_key}); each token needs between 1 and {n} experts."
        )
    return {
        "n_experts": n,
        "experts_per_token": k if n else 2,
        "router_aux_loss_coef": float(hf.get("router_aux_loss_coef", 0.001)),
        "output_router_logits": bool(hf.get("output_router_logits", False)),
    }


def write(c: ModelConfig) -> dict[str, Any]:
    """The top-k and load-balancing keys (each family names its expert count itself)."""
    return {
        "num_experts_per_tok": c.experts_per_token,
        "router_aux_loss_coef": c.router_aux_loss_coef,
        "output_router_logits": c.output_router_logits,
    }


def _stack_transposed(xs: Sequence[Array]) -> list[Array]:
    # Per-expert nn.Linear weights [out, in] -> one [E, in, out] leaf.
    return [array_module(xs).stack([x.T for x in xs])]


def _split_transposed(xs: Sequence[Array]) -> list[Array]:
    (w,) = xs
    # Host arrays (numpy) or tracers: one transfer, then host slices, not a device op per expert.
    stacked: Any = w if isinstance(w, jax.core.Tracer) else np.asarray(w)
    return [stacked[e].T for e in range(stacked.shape[0])]


def layer_rules(
    config: ModelConfig,
    layer: int,
    *,
    module: str,
    router: str,
    projections: tuple[str, str, str],
) -> list[Rule]:
    """Layer ``layer``'s rules: the dense layer's, with a mixture of experts in place of its
    MLP where ``config`` has one there.

    Args:
        module: the Hugging Face name of the MLP module (``block_sparse_moe``, ``mlp``).
        router: the name of its router inside it (``gate``).
        projections: each expert's gate, up and down projections (``w1 w3 w2``).
    """
    rules = _decoder.layer_rules(config, layer)
    if not config.layer_moe(layer):
        return rules
    p = f"model.layers.{{i}}.{module}."
    experts = [one(f"{p}{router}.weight", "mlp.router.weight")]
    for hf, ours in zip(projections, ("gate_proj", "up_proj", "down_proj"), strict=True):
        names = tuple(f"{p}experts.{e}.{hf}.weight" for e in range(config.n_experts))
        experts.append(Rule(names, (f"mlp.{ours}",), _stack_transposed, _split_transposed))
    return [r for r in rules if not r.ours[0].startswith("mlp.")] + experts
