"""Continuations of prompts with zoo's KV-cache generation: left-padded prompts in batches of
one bucketed length, greedy or sampled, stopped at the model's stop tokens, then cut at the
first of the request's stop strings."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh

from .._inference import traced_generate
from ..parallel import mesh_context, to_host
from ._placement import RowPlacer
from ._request_batches import padded_rows, plan_batches


@dataclasses.dataclass(frozen=True)
class Sampling:
    """How one group of requests is decoded.

    Attributes:
        max_new_tokens: tokens generated at most.
        greedy: argmax decoding (else sampled at ``temperature``).
        temperature: > 0 when sampling.
        top_k, top_p: optional filters when sampling.
        seed: the key of the group's first batch (the next batches fold in their index).
    """

    max_new_tokens: int
    greedy: bool = True
    temperature: float = 1.0
    top_k: int | None = None
    top_p: float | None = None
    seed: int = 0


class Generator:
    """Generates with ``model`` on ``mesh``, rows data-parallel over the batch axes; a row ends
    at any of ``stop_tokens`` (left out of its tokens)."""

    def __init__(
        self,
        model: Any,
        mesh: Mesh,
        rules: Mapping[str, Any],
        *,
        max_length: int,
        stop_tokens: Sequence[int],
    ) -> None:
        self.model = model
        self.max_length = max_length
        self.stop_tokens = tuple(int(t) for t in stop_tokens)
        self.placer = RowPlacer(mesh, rules)

    def generate(
        self, prompts: Sequence[Sequence[int]], sampling: Sampling, batch_size: int
    ) -> list[list[int]]:
        """The new tokens of each prompt (each non-empty; cut from the left to leave room for
        ``sampling.max_new_tokens`` within the model's positions)."""
        room = self.max_length - sampling.max_new_tokens
        if room < 1:
            raise ValueError(
                f"max_gen_toks {sampling.max_new_tokens} leaves no room for a prompt in the "
                f"model's {self.max_length} positions; lower it."
            )
        prompts = [list(p)[-room:] for p in prompts]
        out: list[list[int]] = [[] for _ in prompts]
        width = padded_rows(min(batch_size, len(prompts)), self.placer.shards)
        batches = plan_batches([len(p) for p in prompts], batch_size, room)
        for n, batch in enumerate(batches):
            ids = np.zeros((width, batch.length), np.int32)
            mask = np.zeros((width, batch.length), bool)
            mask[:, -1] = True  # filler rows: one token, so every row is a valid prompt
            for row, i in enumerate(batch.indices):
                ids[row, batch.length - len(prompts[i]) :] = prompts[i]
                mask[row, batch.length - len(prompts[i]) :] = True
            new = self._run(ids, mask, sampling, n)
            for row, i in enumerate(batch.indices):
                out[i] = self._until_stop(new[row])
        return out

    def _run(self, ids: np.ndarray, mask: np.ndarray, sampling: Sampling, n: int) -> np.ndarray:
        placed = self.placer.place({"ids": ids, "mask": mask})
        key = jax.random.fold_in(jax.random.key(sampling.seed), n)
        # The seed is in the key: the settings that remain are the program's.
        static = dataclasses.replace(sampling, seed=0)
        with mesh_context(self.placer.mesh, self.placer.rules):
            tokens = traced_generate(self.model, placed["ids"], placed["mask"], key, static,
                               self.stop_tokens)  # fmt: skip
        return np.asarray(to_host(tokens))[:, ids.shape[1] :]

    def _until_stop(self, tokens: np.ndarray) -> list[int]:
        new = [int(t) for t in tokens]
        ends = [k for k, t in enumerate(new) if t in self.stop_tokens]
        return new[: ends[0]] if ends else new
