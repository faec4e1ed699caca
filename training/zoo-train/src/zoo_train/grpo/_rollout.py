"""Rollouts: a step's groups of completions sampled from the very parameters being trained,
with zoo's KV-cache generation on the training mesh, scored by the reward functions, and laid
out as the batch the GRPO loss trains on.

The sampler is one program per batch shape (prompt rows and widths are fixed), so a run
compiles it once. Step ``s`` samples with a key folded from the seed and the index of its
batch of rollouts, so a resumed run samples what an uninterrupted one did. On several
processes each scores the rows its devices hold, whole groups (see :func:`check_groups`).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from typing import Any

import equinox as eqx
import jax
import numpy as np
from jaxtyping import Array, Bool, Int, PRNGKeyArray

from .._inference import traced_generate
from ..loop import pending_signal
from ..parallel import BatchLayout, mesh_context, to_host, unpacked
from ..settings import GRPOConfig
from ._advantages import combined_rewards, group_advantages
from ._loss import completion_logps
from ._prompts import PromptSource
from ._rewards import REWARD_BOUND, RewardError, Rewards


def rollout_key(seed: int, generation: int) -> PRNGKeyArray:
    """The sampling key of the ``generation``-th batch of rollouts of a run seeded ``seed``."""
    return jax.random.fold_in(jax.random.key(seed), generation)


@dataclasses.dataclass(frozen=True)
class _Sampling:
    """The sampler's static settings (one compiled program per value)."""

    max_new_tokens: int
    temperature: float
    top_p: float | None
    top_k: None = None
    greedy: bool = False


@eqx.filter_jit
def _scored_logps(model: Any, batch: dict[str, Array], temperature: float, dtype: Any) -> Array:
    logps, _ = completion_logps(model, batch, temperature, dtype)
    return logps * batch["loss_mask"]


def _check_combined(
    combined: np.ndarray, per_function: np.ndarray, weights: Sequence[float], offset: int
) -> None:
    """Refuse a combined reward beyond :data:`REWARD_BOUND` (or not finite) though a function
    scored its completion: weights so large that what the loss computes from them overflows
    (every reward alone is finite)."""
    with np.errstate(invalid="ignore"):
        scored = ~np.isnan(per_function).all(axis=1)
        bad = np.flatnonzero(scored & ~(np.abs(combined) <= REWARD_BOUND))
    if len(bad):
        row = int(bad[0])
        shown = " ".join(f"{w:g}" for w in weights)
        raise RewardError(
            f"The weighted reward of row {offset + row} is {combined[row]:g} (--reward-weights "
            f"{shown}), beyond {REWARD_BOUND:g}, where the loss's float32 statistics of rewards "
            "overflow; use smaller --reward-weights."
        )


def check_groups(layout: BatchLayout, num_generations: int) -> None:
    """Refuse a layout in which a group of completions would straddle processes.

    Raises:
        ValueError: this process's rows are not whole groups.
    """
    lo, hi = layout.local
    if lo % num_generations or hi % num_generations:
        raise ValueError(
            f"each process holds rows {lo} to {hi} of a step's {layout.rows}, which splits a "
            f"group of --num-generations {num_generations}; make the rows per process a "
            "multiple of it."
        )


def completion_masks(
    completions: Int[np.ndarray, "B L"], stop_tokens: Sequence[int]
) -> tuple[Int[np.ndarray, "B L"], Bool[np.ndarray, " B"]]:
    """``(mask, truncated)``: 1 on each completion's tokens up to and including its first stop
    token (all of them when it has none), and whether it has none (cut at the length limit)."""
    is_stop = np.isin(completions, np.asarray(stop_tokens, np.int64))
    truncated = ~is_stop.any(axis=1)
    first = np.where(truncated, completions.shape[1], is_stop.argmax(axis=1) + 1)
    mask = (np.arange(completions.shape[1])[None, :] < first[:, None]).astype(np.int32)
    return mask, np.asarray(truncated, bool)


def rollout_rows(
    prompt_ids: Int[np.ndarray, "B P"],
    prompt_mask: Int[np.ndarray, "B P"],
    completions: Int[np.ndarray, "B L"],
    completion_mask: Int[np.ndarray, "B L"],
) -> dict[str, np.ndarray]:
    """The rows the loss reads, ``[B, P + L - 1]``: each left-padded prompt then its
    completion, shifted by one into ``input_ids`` and ``targets``; positions count real tokens
    from 0 (as generation counted them); padding is segment 0 and real tokens segment 1, so
    no real token attends to padding; ``loss_mask`` is 1 on the completion's tokens."""
    seq = np.concatenate([prompt_ids, completions], axis=1).astype(np.int32)
    real = np.concatenate([prompt_mask, completion_mask], axis=1).astype(np.int32)
    positions = np.maximum(np.cumsum(real, axis=1) - 1, 0)
    on_completion = np.arange(seq.shape[1])[None, 1:] >= prompt_ids.shape[1]
    return {
        "input_ids": seq[:, :-1],
        "targets": seq[:, 1:],
        "positions": positions[:, :-1].astype(np.int32),
        "segment_ids": real[:, :-1],
        "loss_mask": (real[:, 1:] * on_completion).astype(np.float32),
    }


@dataclasses.dataclass
class Samples:
    """What the last rollout sampled, for the completion log: per row of this process, the
    prompt as the reward functions saw it, the completion's text, each function's reward
    (``None`` where it returned ``None``) and the advantage."""

    step: int
    prompts: list[Any]
    completions: list[Any]
    rewards: dict[str, list[float | None]]
    advantages: list[float]


class Rollout:
    """Turns a step's prompt rows into the batch :class:`~zoo_train.grpo.GRPOLoss` trains on.

    Args:
        config: the GRPO settings.
        source: where the prompt rows come from (their texts and columns are read here).
        rewards: the reward functions.
        tokenizer: decodes completions for the reward functions.
        layout: the layout of a step's rows on the mesh.
        rules: the sharding rules.
        stop_tokens: ids that end a completion (the model's end of turn or text).
        seed: the run's seed; sampling keys fold in the index of each batch of rollouts.
        reference: ``"batch"``: add the reference's log-probabilities, computed with
            ``reference_model``; else nothing (``"adapters"`` is computed in the loss).
        reference_model: the starting weights, with ``reference="batch"``.
        compute_dtype: the forward passes' dtype.
    """

    def __init__(
        self,
        config: GRPOConfig,
        source: PromptSource,
        rewards: Rewards,
        tokenizer: Any,
        *,
        layout: BatchLayout,
        rules: Any,
        stop_tokens: Sequence[int],
        seed: int,
        reference: str | None = None,
        reference_model: Any = None,
        compute_dtype: Any = None,
    ) -> None:
        check_groups(layout, config.num_generations)
        if reference == "batch" and reference_model is None:
            raise ValueError("reference='batch' needs the reference model.")
        self.config = config
        self.source = source
        self.rewards = rewards
        self.tokenizer = tokenizer
        self.layout = layout
        self.rules = rules
        self.stop_tokens = tuple(int(t) for t in stop_tokens)
        self.seed = seed
        self.reference = reference
        self.reference_model = reference_model
        self.compute_dtype = compute_dtype
        self.sampling = _Sampling(
            max_new_tokens=config.max_completion_length,
            temperature=float(config.temperature),
            top_p=None if config.top_p >= 1.0 else float(config.top_p),
        )
        self.last: Samples | None = None
        #: Seconds of the last rollout's parts: ``sampling`` (generation, to the host),
        #: ``reward`` (decoding, reward functions, advantages), ``scoring`` (the batch placed,
        #: with the old policy's and the reference's log-probabilities where needed).
        self.timings: dict[str, float] = {}
        self._step = 0
        self._cached: tuple[int, dict[str, Any]] | None = None

    def fields(self) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
        """Each field of a step's batch with its shape and dtype."""
        rows = self.layout.rows
        width = self.source.width + self.config.max_completion_length - 1
        out: dict[str, tuple[tuple[int, ...], np.dtype]]
        out = {k: ((rows, width), np.dtype(np.int32)) for k in
               ("input_ids", "targets", "positions", "segment_ids")}  # fmt: skip
        out["loss_mask"] = ((rows, width), np.dtype(np.float32))
        f = len(self.rewards.names)
        out.update(
            {
                "advantages": ((rows,), np.dtype(np.float32)),
                "rewards": ((rows, f), np.dtype(np.float32)),
                "reward_scored": ((rows, f), np.dtype(np.float32)),
                "truncated": ((rows,), np.dtype(np.float32)),
            }
        )
        if not self.config.on_policy:
            out["old_logps"] = ((rows, width), np.dtype(np.float32))
        if self.reference == "batch":
            out["ref_logps"] = ((rows, width), np.dtype(np.float32))
        return out

    def shapes(self) -> dict[str, jax.ShapeDtypeStruct]:
        """The batch's fields as abstract arrays (to trace the loss before the first step)."""
        return {k: jax.ShapeDtypeStruct(s, d) for k, (s, d) in self.fields().items()}

    def __call__(self, model: Any, step: int, prompt_batch: Any) -> dict[str, jax.Array]:
        """The batch of step ``step`` (1-based) on the devices: sampled now with ``model`` at
        the first step of each batch of rollouts, reused for the ``num_iterations - 1``
        steps after it (their prompt rows unused)."""
        generation = (step - 1) // self.config.num_iterations
        if self._cached is not None and self._cached[0] == generation:
            return self._cached[1]
        self._step = step
        batch = self._roll(model, generation, step, unpacked(prompt_batch))
        self._cached = (generation, batch)
        return batch

    def _roll(
        self, model: Any, generation: int, step: int, prompts: dict[str, jax.Array]
    ) -> dict[str, jax.Array]:
        key = rollout_key(self.seed, generation)
        mesh = self.layout.mesh
        started = time.perf_counter()
        with mesh_context(mesh, self.rules):
            tokens = traced_generate(
                model,
                prompts["prompt_ids"],
                prompts["prompt_mask"].astype(bool),
                key,
                self.sampling,
                self.stop_tokens,
            )
        lo, hi = self.layout.local
        width = self.source.width
        host = to_host({"tokens": tokens, "mask": prompts["prompt_mask"],
                        "index": prompts["prompt_index"]})  # fmt: skip
        seq, prompt_mask, index = (np.asarray(host[k])[lo:hi] for k in ("tokens", "mask", "index"))
        sampled = time.perf_counter()
        completions = seq[:, width:]
        mask, truncated = completion_masks(completions, self.stop_tokens)
        rows = rollout_rows(seq[:, :width], prompt_mask, completions, mask)
        per_function, advantages, texts, shown = self._score(index, completions, mask, lo)
        rewarded = time.perf_counter()
        scored = ~np.isnan(per_function)
        rows.update(
            {
                "advantages": advantages,
                "rewards": np.where(scored, per_function, 0.0).astype(np.float32),
                "reward_scored": scored.astype(np.float32),
                "truncated": truncated.astype(np.float32),
            }
        )
        placed = self.layout.place(rows)
        with mesh_context(mesh, self.rules):
            if not self.config.on_policy:
                placed["old_logps"] = _scored_logps(
                    model, placed, self.config.temperature, self.compute_dtype
                )
            if self.reference == "batch":
                placed["ref_logps"] = _scored_logps(
                    self.reference_model, placed, self.config.temperature, self.compute_dtype
                )
        jax.block_until_ready(placed)
        self.timings = {
            "sampling": sampled - started,
            "reward": rewarded - sampled,
            "scoring": time.perf_counter() - rewarded,
        }
        self.last = Samples(
            step=step,
            prompts=shown,
            completions=texts,
            rewards={
                name: [None if np.isnan(v) else float(v) for v in per_function[:, j]]
                for j, name in enumerate(self.rewards.names)
            },
            advantages=[float(a) for a in advantages],
        )
        return placed

    def _score(
        self, index: np.ndarray, completions: np.ndarray, mask: np.ndarray, offset: int
    ) -> tuple[np.ndarray, np.ndarray, list[Any], list[Any]]:
        """``(per_function [n, F], advantages [n], completions, prompts)`` of this process's
        rows."""
        prompts = [self.source.prompts[int(i)] for i in index]
        texts: list[Any] = []
        for prompt, row, m in zip(prompts, completions, mask, strict=True):
            ids = [int(t) for t in row[: int(m.sum())] if int(t) not in self.stop_tokens]
            text = self.tokenizer.decode(ids)
            texts.append([{"role": "assistant", "content": text}] if prompt.chat else text)
        names = sorted({k for p in prompts for k in p.columns})
        columns = {k: [p.columns.get(k) for p in prompts] for k in names}
        shown = [p.shown for p in prompts]
        try:
            per_function = self.rewards.score(
                shown, texts, columns, offset=offset, interrupted=pending_signal
            )
            combined = combined_rewards(per_function, np.asarray(self.rewards.weights))
            _check_combined(combined, per_function, self.rewards.weights, offset)
        except RewardError as e:
            raise RewardError(
                f"{str(e).rstrip('.')} at step {self._step}; the run stops with its last "
                "checkpoint kept, and resuming samples this step again."
            ) from e
        if self.config.scale_rewards == "batch" and jax.process_count() > 1:
            from jax.experimental import multihost_utils

            everyone = np.asarray(multihost_utils.process_allgather(combined)).reshape(-1)
            lo = offset
            advantages, _ = group_advantages(everyone, self.config.num_generations, "batch")
            advantages = advantages[lo : lo + len(combined)]
        else:
            advantages, _ = group_advantages(
                combined, self.config.num_generations, self.config.scale_rewards
            )
        return per_function, advantages, texts, shown
