"""The prompts GRPO samples from: records (JSON lines, Parquet, Arrow) of ``prompt`` (text, or chat messages
rendered with the model's chat template) and any other columns, handed to the reward
functions; and the data source that gives each step its rows, a prompt repeated over its group.

Which prompts a step draws is a pure function of (seed, position), so a resumed run draws
what the uninterrupted one would have.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from ._rewards import RESERVED_ARGUMENTS

#: What to do with a prompt longer than ``max_prompt_length`` tokens.
LONG_PROMPTS = ("refuse", "cut")


@dataclasses.dataclass(frozen=True)
class Prompt:
    """One prompt: its tokens, what reward functions see of it, and its other columns."""

    ids: tuple[int, ...]
    shown: Any  # the text, or the list of chat messages (as TRL passes prompts)
    columns: dict[str, Any]
    chat: bool = False  # completions are then passed as chat messages too


def _encode(record: dict[str, Any], tokenizer: Any) -> tuple[list[int], Any, bool]:
    """``(ids, shown, is_chat)`` of a record's ``prompt`` (or ``messages``)."""
    from zoo_data import leading_bos

    from .._chat_prompt import chat_prompt_ids

    prompt = record.get("prompt", record.get("messages"))
    if isinstance(prompt, str):
        bos = leading_bos(tokenizer)
        return ([] if bos is None else [bos]) + list(tokenizer.encode(prompt)), prompt, False
    if isinstance(prompt, list) and all(isinstance(m, dict) for m in prompt):
        return chat_prompt_ids(tokenizer, prompt), prompt, True
    raise ValueError("needs `prompt` as text or as a list of chat messages (or `messages`)")


def read_prompts(
    sources: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    tokenizer: Any,
    *,
    max_prompt_length: int,
    long_prompts: str = "refuse",
) -> list[Prompt]:
    """The prompts of ``sources``, tokenized.

    Args:
        sources: files, directories or globs of records (:func:`zoo_data.read_records`: JSON
            lines, plain or compressed, Parquet, Arrow, ``datasets`` directories), each with
            ``prompt`` (or ``messages``); every other field is a column for the reward
            functions.
        tokenizer: the model's (its chat template renders chat prompts).
        max_prompt_length: tokens a prompt may have (the room left beside the completion).
        long_prompts: ``"refuse"``: a longer prompt is an error naming its record; ``"cut"``:
            its first tokens are dropped (the end of a prompt is what the completion follows).

    Raises:
        ValueError: an unreadable record, a record without a prompt, no record at all, a
            column named as a reward function's own argument (:data:`RESERVED_ARGUMENTS`), or
            a prompt too long with ``long_prompts="refuse"``; the message names the record.
    """
    from zoo_data import read_records

    if long_prompts not in LONG_PROMPTS:
        raise ValueError(f"--long-prompts must be one of {LONG_PROMPTS}, got {long_prompts!r}.")
    out: list[Prompt] = []
    for record in read_records(sources):
        try:
            ids, shown, chat = _encode(record.values, tokenizer)
        except ValueError as e:
            raise ValueError(f"{record.where} {e}.") from None
        if len(ids) > max_prompt_length:
            if long_prompts == "refuse":
                raise ValueError(
                    f"{record.where} has a prompt of {len(ids)} tokens, more than "
                    f"--max-prompt-length {max_prompt_length}; raise it, or pass "
                    "--long-prompts cut to keep the last tokens."
                )
            ids = ids[-max_prompt_length:]
        columns = {k: v for k, v in record.values.items() if k not in ("prompt", "messages")}
        taken = [k for k in RESERVED_ARGUMENTS if k in columns]
        if taken:
            raise ValueError(
                f"{record.where} has a column named `{taken[0]}`, the name of the argument "
                f"every reward function is called with ({', '.join(RESERVED_ARGUMENTS)}); "
                "rename that column."
            )
        out.append(Prompt(tuple(int(i) for i in ids), shown, columns, chat))
    if not out:
        raise ValueError(f"{', '.join(map(str, _listed(sources)))} holds no prompt.")
    return out


def _listed(sources: str | os.PathLike[str] | Sequence[str | os.PathLike[str]]) -> list[Any]:
    return [sources] if isinstance(sources, str | os.PathLike) else list(sources)


class PromptSource:
    """A :class:`~zoo_data.DataSource` of prompt rows: ``next_batch(n)`` gives ``n`` rows,
    ``n / num_generations`` prompts each repeated ``num_generations`` times (a group's rows
    consecutive), as ``prompt_ids`` and ``prompt_mask`` int32 ``[n, max_prompt_length]`` (left
    padded) and ``prompt_index`` int32 ``[n]``. Prompts are drawn without replacement in an
    order shuffled anew each epoch from ``seed``."""

    def __init__(
        self,
        prompts: Sequence[Prompt],
        *,
        num_generations: int,
        max_prompt_length: int,
        seed: int,
        pad_id: int = 0,
        name: str = "prompts",
    ) -> None:
        self.prompts = list(prompts)
        self.num_generations = num_generations
        self.width = max_prompt_length
        self.seed = seed
        self.pad_id = pad_id
        self.name = name
        self.position = 0  # prompts drawn so far
        self._orders: dict[int, np.ndarray] = {}

    def _order(self, epoch: int) -> np.ndarray:
        if epoch not in self._orders:
            rng = np.random.default_rng([self.seed, epoch])
            self._orders = {epoch: rng.permutation(len(self.prompts))}
        return self._orders[epoch]

    def indices(self, start: int, count: int) -> np.ndarray:
        """The prompts drawn at positions ``start`` to ``start + count``."""
        n = len(self.prompts)
        return np.array([self._order(p // n)[p % n] for p in range(start, start + count)])

    def next_batch(self, n: int, rows: tuple[int, int] | None = None) -> dict[str, np.ndarray]:
        g = self.num_generations
        if n % g:
            raise ValueError(f"a step's {n} rows are not whole groups of {g} completions.")
        index = np.repeat(self.indices(self.position, n // g), g)
        self.position += n // g
        lo, hi = rows if rows is not None else (0, n)
        index = index[lo:hi]
        ids = np.full((len(index), self.width), self.pad_id, np.int32)
        mask = np.zeros((len(index), self.width), np.int32)
        for row, i in enumerate(index):
            p = self.prompts[i].ids
            ids[row, self.width - len(p) :] = p
            mask[row, self.width - len(p) :] = 1
        return {"prompt_ids": ids, "prompt_mask": mask, "prompt_index": index.astype(np.int32)}

    def state_dict(self) -> dict[str, Any]:
        return {"position": self.position}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.position = int(state["position"])

    def describe(self) -> dict[str, Any]:
        digest = hashlib.sha256(json.dumps([p.ids for p in self.prompts]).encode()).hexdigest()
        return {"kind": "grpo_prompts", "name": self.name, "prompts": len(self.prompts),
                "width": self.width, "num_generations": self.num_generations,
                "seed": self.seed, "ids_sha256": digest[:16]}  # fmt: skip
