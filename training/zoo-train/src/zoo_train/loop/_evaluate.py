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


def _losses(totals: dict[str, float]) -> tuple[float, float, float]:
    """``(loss, perplexity, tokens)`` of summed evaluation results."""
    weight = totals.get("weight", 0.0)
    if weight <= 0:
        raise ValueError("The evaluation data has no counted tokens; give it longer documents.")
    ce = totals.get("ce", totals["loss_sum"]) / weight
    return totals["loss_sum"] / weight, math.exp(min(ce, 700.0)), weight


def evaluate(
    eval_step: EvalFn, state: TrainState, data: EvalData, layout: BatchLayout, limit: int | None
) -> dict[str, float]:
    """``{"eval_loss", "eval_ppl", "eval_tokens"}`` over at most ``limit`` batches of each
    source, each laid out by ``layout``. ``data`` may map names to sources: the figures are then
    over all of them together, plus ``eval_loss/NAME`` per source when there are several.

    Raises:
        ValueError: the data has no counted token.
    """
    sources = dict(data) if isinstance(data, Mapping) else {"": data}
    parts = {name: _sums(eval_step, state, s, layout, limit) for name, s in sources.items()}
    total: dict[str, float] = {}
    for sums in parts.values():
        for k, v in sums.items():
            total[k] = total.get(k, 0.0) + v
    loss, ppl, tokens = _losses(total)
    out = {"eval_loss": loss, "eval_ppl": ppl, "eval_tokens": tokens}
    if len(parts) > 1:
        for name, sums in parts.items():
            if sums.get("weight", 0.0) > 0:
                out[f"eval_loss/{name}"] = _losses(sums)[0]
    return out
