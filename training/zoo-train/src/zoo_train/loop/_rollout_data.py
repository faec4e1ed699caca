"""``RolloutData``: a data stream whose step batches are made with the model being trained (GRPO's
sampled completions), a transform of the rows a source gives rather than an argument of the
loop."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

import jax

from zoo_data import Batch, DataSource


class Rollout(Protocol):
    """``rollout(model, step, rows) -> batch`` and ``rollout.shapes()``, the batch's fields as
    abstract arrays (the kernel resolution traces the loss on them)."""

    def __call__(self, model: Any, step: int, rows: Any, /) -> dict[str, jax.Array]: ...

    def shapes(self) -> Mapping[str, jax.ShapeDtypeStruct]: ...


class RolloutData:
    """The rows of ``source`` (prompts, say), each step's made into that step's batch by
    ``rollout(model, step, rows)`` with the model being trained, on the host before the step's
    update. Everything else (``next_batch``, ``state_dict``, ``load_state_dict``, ``describe``,
    sizes) is the source's, so the run's identity and resume are the source's.
    """

    def __init__(self, source: DataSource, rollout: Rollout) -> None:
        self.source = source
        self.rollout = rollout

    def __getattr__(self, name: str) -> Any:
        # The source's sizes and mixture (``rows_per_epoch``, ``source_tokens``, ``stores``).
        if name in ("source", "rollout"):  # not yet set (copying, unpickling)
            raise AttributeError(name)
        return getattr(self.source, name)

    @property
    def next_batch(self) -> Callable[..., Batch]:
        """The source's ``next_batch``, its signature too (a source may take ``rows=``)."""
        return self.source.next_batch

    def state_dict(self) -> dict[str, Any]:
        """The source's position."""
        return self.source.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Move the source to ``state``."""
        self.source.load_state_dict(state)

    def describe(self) -> dict[str, Any]:
        """The source's description (part of the run's identity)."""
        return self.source.describe()

    def make_batch(self, model: Any, step: int, rows: Any) -> dict[str, jax.Array]:
        """The batch step ``step`` trains on, made from ``rows`` with ``model``."""
        return self.rollout(model, step, rows)

    def shapes(self) -> Mapping[str, jax.ShapeDtypeStruct]:
        """The fields of a step's batch, as abstract arrays."""
        return self.rollout.shapes()
