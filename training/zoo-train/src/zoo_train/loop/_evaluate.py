"""Held-out loss and perplexity of the state being trained, over one source or several."""

from __future__ import annotations

import math
from collections.abc import Mapping

import jax

from .._state import TrainState
from .._step import EvalFn
from ..parallel import BatchLayout
from ._result import EvalSource

EvalData = EvalSource | Mapping[str, EvalSource]


def _sums(
    eval_step: EvalFn, state: TrainState, source: EvalSource, layout: BatchLayout, limit: int | None
) -> dict[str, float]:
    totals: dict[str, float] = {}
    for batch in source.eval_batches(layout.rows, max_batches=limit):
        placed = layout.place_packed(layout.local_part(batch))
        for k, v in jax.device_get(eval_step(placed, state)).items():
            totals[k] = totals.get(k, 0.0) + float(v)
    return totals


_LM_SUMS = ("loss_sum", "weight", "ce", "z_loss")


def _losses(totals: dict[str, float], unit: str = "tokens") -> dict[str, float]:
    """``eval_loss``, the count (``eval_tokens``), ``eval_ppl`` (a loss counted in tokens) and
    every other summed metric's mean (``eval_rewards/accuracies``) of summed results."""
    weight = totals.get("weight", 0.0)
    if weight <= 0:
        raise ValueError(f"The evaluation data has no counted {unit}; give it longer documents.")
    out = {"eval_loss": totals["loss_sum"] / weight}
    if unit == "tokens":
        ce = totals.get("ce", totals["loss_sum"]) / weight
        out["eval_ppl"] = math.exp(min(ce, 700.0))
    out[f"eval_{unit}"] = weight
    out.update({f"eval_{k}": v / weight for k, v in totals.items() if k not in _LM_SUMS})
    return out


def evaluate(
    eval_step: EvalFn,
    state: TrainState,
    data: EvalData,
    layout: BatchLayout,
    limit: int | None,
    unit: str = "tokens",
) -> dict[str, float]:
    """``{"eval_loss", "eval_ppl", "eval_tokens"}`` over at most ``limit`` batches of each
    source, each laid out by ``layout``, and the mean of every other sum the loss reports
    (``eval_rewards/accuracies``, ...). ``data`` may map names to sources: the figures are then
    over all of them together, plus ``eval_loss/NAME`` per source when there are several. A loss
    counted in another ``unit`` (pairs) has no perplexity and reports ``eval_UNIT``.

    Raises:
        ValueError: the data has no counted token.
    """
    sources = dict(data) if isinstance(data, Mapping) else {"": data}
    parts = {name: _sums(eval_step, state, s, layout, limit) for name, s in sources.items()}
    total: dict[str, float] = {}
    for sums in parts.values():
        for k, v in sums.items():
            total[k] = total.get(k, 0.0) + v
    out = _losses(total, unit)
    if len(parts) > 1:
        for name, sums in parts.items():
            if sums.get("weight", 0.0) > 0:
                out[f"eval_loss/{name}"] = _losses(sums, unit)["eval_loss"]
    return out
