"""Held-out loss and perplexity of the state being trained."""

from __future__ import annotations

import math

import jax

from .._state import TrainState
from .._step import EvalFn
from ..parallel import BatchLayout
from ._result import EvalSource


def evaluate(
    eval_step: EvalFn, state: TrainState, source: EvalSource, layout: BatchLayout, limit: int | None
) -> dict[str, float]:
    """``{"eval_loss", "eval_ppl", "eval_tokens"}`` over at most ``limit`` batches of
    ``source``, each laid out by ``layout``.

    Raises:
        ValueError: the data has no counted token.
    """
    totals: dict[str, float] = {}
    for batch in source.eval_batches(layout.rows, max_batches=limit):
        placed = layout.place_packed(layout.local_part(batch))
        for k, v in jax.device_get(eval_step(placed, state)).items():
            totals[k] = totals.get(k, 0.0) + float(v)
    weight = totals.get("weight", 0.0)
    if weight <= 0:
        raise ValueError("The evaluation data has no counted tokens; give it longer documents.")
    loss = totals["loss_sum"] / weight
    ce = totals.get("ce", totals["loss_sum"]) / weight
    return {"eval_loss": loss, "eval_ppl": math.exp(min(ce, 700.0)), "eval_tokens": weight}
