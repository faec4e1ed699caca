"""Reward functions named on the command line, loaded, called and checked.

``--reward module:function`` imports a module, ``--reward path/to/file.py:function`` a file, and
a bare name is a built-in (:data:`BUILTIN_REWARDS`). Each function is called as TRL calls it,
``fn(prompts, completions, **columns)``, and must return one number (or ``None``: does not
apply) per completion; anything else stops the run with a sentence naming the function and the
row.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import math
import numbers
import pathlib
import sys
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from jaxtyping import Float

from ._builtin_rewards import BUILTIN_REWARDS, RewardFn


class RewardError(ValueError):
    """A reward function failed or returned something that is not a reward per completion
    (the user's code: the command line says it in one sentence and exits 2)."""


def load_reward(spec: str) -> tuple[str, RewardFn]:
    """``(name, fn)`` of ``spec``: a built-in's name, ``module:function`` or
    ``path/to/file.py:function``; ``name`` is the function's ``__name__``.

    Raises:
        ValueError: the module, file or function cannot be found, or is not callable.
    """
    if ":" not in spec:
        if spec in BUILTIN_REWARDS:
            return spec, BUILTIN_REWARDS[spec]
        raise ValueError(
            f"--reward {spec!r} is neither a built-in ({', '.join(BUILTIN_REWARDS)}) nor "
            "module:function or path/to/file.py:function."
        )
    where, name = spec.rsplit(":", 1)
    if where.endswith(".py"):
        path = pathlib.Path(where)
        if not path.is_file():
            raise ValueError(f"--reward {spec!r}: no file {where}.")
        module_name = f"zoo_reward_{path.stem}_{abs(hash(str(path.resolve())))}"
        loaded = importlib.util.spec_from_file_location(module_name, path)
        if loaded is None or loaded.loader is None:
            raise ValueError(f"--reward {spec!r}: {where} cannot be imported.")
        module = importlib.util.module_from_spec(loaded)
        sys.modules[module_name] = module
        loaded.loader.exec_module(module)
    else:
        try:
            module = importlib.import_module(where)
        except ImportError as e:
            raise ValueError(f"--reward {spec!r}: cannot import {where} ({e}).") from None
    fn = getattr(module, name, None)
    if not callable(fn):
        raise ValueError(f"--reward {spec!r}: {where} has no function {name}.")
    return getattr(fn, "__name__", name), fn


def _checked(name: str, values: Any, n: int, offset: int) -> np.ndarray:
    """``values`` as float64 ``[n]`` (NaN for ``None``), or :class:`RewardError`."""
    if not isinstance(values, Sequence | np.ndarray) or isinstance(values, str | bytes):
        raise RewardError(
            f"Reward function {name} returned {type(values).__name__}, not a list of {n} rewards."
        )
    if len(values) != n:
        raise RewardError(
            f"Reward function {name} returned {len(values)} rewards for {n} completions "
            f"(rows {offset} to {offset + n - 1})."
        )
    out = np.empty(n, np.float64)
    for i, value in enumerate(values):
        if value is None:
            out[i] = np.nan
            continue
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise RewardError(
                f"Reward function {name} returned {value!r} for row {offset + i}, not a number."
            )
        if not math.isfinite(float(value)):
            raise RewardError(f"Reward function {name} returned {value} for row {offset + i}.")
        out[i] = float(value)
    return out


@dataclasses.dataclass(frozen=True)
class Rewards:
    """Several reward functions with their weights.

    Attributes:
        names: one per function (its ``__name__``; the metrics' ``rewards/<name>/mean``).
        functions: the callables.
        weights: their weights in the combined reward (default 1 each).
    """

    names: tuple[str, ...]
    functions: tuple[RewardFn, ...]
    weights: tuple[float, ...]

    @classmethod
    def load(cls, specs: Sequence[str], weights: Sequence[float] | None = None) -> Rewards:
        """The functions of ``specs`` (see :func:`load_reward`) with ``weights``.

        Raises:
            ValueError: no function, a spec that does not load, or a weight per function
                missing.
        """
        if not specs:
            raise ValueError("GRPO needs at least one --reward (e.g. --reward answer_match).")
        loaded = [load_reward(s) for s in specs]
        if weights is None:
            weights = [1.0] * len(loaded)
        if len(weights) != len(loaded):
            raise ValueError(
                f"--reward-weights gives {len(weights)} weights for {len(loaded)} reward "
                "functions; give one per --reward."
            )
        names = [n for n, _ in loaded]
        # The same function twice still gets two metric names.
        unique = [n if names.count(n) == 1 else f"{n}_{i}" for i, n in enumerate(names)]
        return cls(tuple(unique), tuple(f for _, f in loaded), tuple(float(w) for w in weights))

    def score(
        self,
        prompts: list[Any],
        completions: list[Any],
        columns: Mapping[str, list[Any]],
        *,
        offset: int = 0,
    ) -> Float[np.ndarray, "N F"]:
        """Every function's reward of every completion, float64 ``[N, F]`` (NaN where a
        function returned ``None``).

        Args:
            prompts, completions: one per completion (a prompt repeated over its group).
            columns: the prompts' other columns, one value per completion.
            offset: the first row's index in the step's batch (for the error's row).

        Raises:
            RewardError: a function raised, or returned the wrong length, NaN, an infinity or
                something that is not a number.
        """
        n = len(completions)
        out = np.empty((n, len(self.functions)), np.float64)
        for j, (name, fn) in enumerate(zip(self.names, self.functions, strict=True)):
            try:
                values = fn(prompts=prompts, completions=completions, **columns)
            except Exception as e:  # any failure of user code stops the run, named
                raise RewardError(
                    f"Reward function {name} raised {type(e).__name__}: {e} (on rows {offset} "
                    f"to {offset + n - 1})."
                ) from e
            out[:, j] = _checked(name, values, n, offset)
        return out
