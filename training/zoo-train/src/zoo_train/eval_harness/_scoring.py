"""Log-likelihoods of continuations: right-padded rows of ``(context, continuation)`` tokens,
scored in one forward pass per batch, with whether greedy decoding would have produced them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh
from jaxtyping import Array, Bool, Float, Int

from ..parallel import MeshFunction, batch_shardings, replicated, to_host
from ._placement import RowPlacer
from ._request_batches import padded_rows, plan_batches

#: A request: ``(context tokens, continuation tokens)``, both non-empty.
Pair = tuple[Sequence[int], Sequence[int]]


def token_scores(
    model: Any, batch: Mapping[str, Int[Array, "B T"]]
) -> tuple[Float[Array, "B T"], Bool[Array, "B T"]]:
    """Per position, the float32 log-probability of ``batch["targets"]`` after
    ``batch["input_ids"]`` and whether it is the argmax (``[B, T]`` each). A zoo model's
    log-probabilities come from the fused cross-entropy contract and its argmax a few hundred
    tokens' logits at a time, never the batch's logits at once."""
    targets = batch["targets"]
    if callable(getattr(model, "hidden_and_head", None)):
        hidden, head, _ = model.hidden_and_head(batch["input_ids"])
        ce, _ = head.cross_entropy(hidden, targets)
        return -ce, head.greedy(hidden) == targets
    logits = model(batch["input_ids"]).astype(jnp.float32)
    # The target's logit less log Z: no second [B, T, V] array beside the logits.
    picked = jnp.take_along_axis(logits, targets[..., None], axis=-1)[..., 0]
    logp = picked - jax.nn.logsumexp(logits, axis=-1)
    return logp, jnp.argmax(logits, axis=-1) == targets


class Scorer:
    """Scores requests with ``model`` on ``mesh`` (rows data-parallel over the batch axes).

    Rows are cut to the model's last ``max_length`` positions from the left, as lm-eval's
    Hugging Face backend does.
    """

    def __init__(
        self, model: Any, mesh: Mesh, rules: Mapping[str, Any], *, max_length: int
    ) -> None:
        self.model = model
        self.max_length = max_length
        self.placer = RowPlacer(mesh, rules)
        self._fn = MeshFunction(
            token_scores,
            mesh=mesh,
            rules=rules,
            in_shardings=(None, lambda b: batch_shardings(b, mesh, rules)),
            out_shardings=replicated(mesh),
        )

    def score(self, pairs: Sequence[Pair], batch_size: int) -> list[tuple[float, bool]]:
        """``(log-likelihood, is_greedy)`` of each continuation given its context."""
        rows = [self._row(c, x) for c, x in pairs]
        out: list[tuple[float, bool]] = [(0.0, False)] * len(rows)
        batches = plan_batches([len(r[0]) for r in rows], batch_size, self.max_length)
        # The row count of every batch: one program per bucket, not per leftover.
        width = padded_rows(min(batch_size, len(rows)), self.placer.shards)
        for batch in batches:
            ids = np.zeros((width, batch.length), np.int32)
            targets = np.zeros((width, batch.length), np.int32)
            for row, i in enumerate(batch.indices):
                inp, tgt, _ = rows[i]
                ids[row, : len(inp)] = inp
                targets[row, : len(tgt)] = tgt
            placed = self.placer.place({"input_ids": ids, "targets": targets})
            logp, greedy = to_host(self._fn(self.model, placed))
            for row, i in enumerate(batch.indices):
                inp, _, n = rows[i]
                span = slice(len(inp) - n, len(inp))
                out[i] = (float(logp[row, span].sum()), bool(greedy[row, span].all()))
        return out

    def _row(self, context: Sequence[int], continuation: Sequence[int]) -> tuple[Any, Any, int]:
        if not context or not continuation:
            raise ValueError("A scored request needs context and continuation tokens.")
        if len(continuation) > self.max_length:
            raise ValueError(
                f"A continuation of {len(continuation)} tokens is longer than the model's "
                f"{self.max_length} positions."
            )
        whole = [*context, *continuation][-(self.max_length + 1) :]
        return whole[:-1], whole[1:], len(continuation)
