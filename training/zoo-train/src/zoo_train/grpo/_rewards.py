"""Reward functions named on the command line, loaded, called and checked.

``--reward module:function`` imports a module, ``--reward path/to/file.py:function`` a file, and
a bare name is a built-in (:data:`BUILTIN_REWARDS`). Each function is called as TRL calls it,
``fn(prompts, completions, **columns)``, and must return one number (or ``None``: does not
apply) per completion; anything else stops the run with a sentence naming the function and the
row.

A function from a module or file runs in a process of its own
(:class:`~zoo_train.reward_process.RewardProcess`): it gets copies of its arguments, a call
that takes longer than the timeout is ended, ``SystemExit`` or any other exception is a failed
reward, and nothing it starts outlives the call. A function handed in as a Python callable (and
the built-ins) runs here, on copies of its arguments.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
import math
import numbers
import pathlib
import reprlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
from jaxtyping import Float

from ..reward_process import RewardProcess, RewardProcessError
from ._builtin_rewards import BUILTIN_REWARDS, RewardFn

logger = logging.getLogger("zoo_train")

#: Seconds one call of a reward function on a step's completions may take by default: generous,
#: for a function that runs tests or asks a judge over the network.
DEFAULT_REWARD_TIMEOUT = 600.0
#: Keyword arguments every call passes, which no column of the prompts may take.
RESERVED_ARGUMENTS = ("prompts", "completions")
#: The largest combined reward (and weight), in magnitude, a step trains on: the loss squares
#: rewards in float32 (their standard deviation over a batch), which stays finite below it for
#: batches of millions of completions.
REWARD_BOUND = 1e15
_SHOWN = 200  # characters of an exception's message in a sentence
_FLOAT32_MAX = float(np.finfo(np.float32).max)


class RewardError(ValueError):
    """A reward function failed or returned something that is not a reward per completion
    (the user's code: the command line says it in one sentence and exits 2)."""


def load_reward(
    spec: str, *, timeout: float = DEFAULT_REWARD_TIMEOUT
) -> tuple[str, RewardFn | RewardProcess]:
    """``(name, fn)`` of ``spec``: a built-in's name, ``module:function`` or
    ``path/to/file.py:function`` (imported in a process of its own, within ``timeout``
    seconds: a :class:`~zoo_train.reward_process.RewardProcess`); ``name`` is the function's
    ``__name__``.

    Raises:
        ValueError: the module, file or function cannot be found or imported (whatever the
            module's code raised), or is not callable.
    """
    if ":" not in spec:
        if spec in BUILTIN_REWARDS:
            return spec, BUILTIN_REWARDS[spec]
        raise ValueError(
            f"--reward {spec!r} is neither a built-in ({', '.join(BUILTIN_REWARDS)}) nor "
            "module:function or path/to/file.py:function."
        )
    where, _ = spec.rsplit(":", 1)
    if where.endswith(".py") and not pathlib.Path(where).is_file():
        raise ValueError(f"--reward {spec!r}: no file {where}.")
    process = RewardProcess(spec, timeout=timeout)
    return process.name, process


def _shown(value: Any) -> str:
    """``repr(value)``, cut short (a reward may return a whole document)."""
    shown = reprlib.Repr()
    shown.maxstring = shown.maxother = 60
    return shown.repr(value)


def _said(err: BaseException) -> str:
    text = " ".join(str(err).split())
    text = text if len(text) <= _SHOWN else text[: _SHOWN - 1] + "…"
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


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
                f"Reward function {name} returned {_shown(value)} for row {offset + i}, not a "
                "number."
            )
        if not math.isfinite(float(value)):
            raise RewardError(f"Reward function {name} returned {value} for row {offset + i}.")
        if abs(float(value)) > _FLOAT32_MAX:  # the batch holds rewards as float32
            raise RewardError(
                f"Reward function {name} returned {float(value):g} for row {offset + i}, beyond "
                f"float32's range ({_FLOAT32_MAX:.3g}); scale its rewards down."
            )
        out[i] = float(value)
    return out


@dataclasses.dataclass(frozen=True)
class Rewards:
    """Several reward functions with their weights.

    Attributes:
        names: one per function (its ``__name__``; the metrics' ``rewards/<name>/mean``).
        functions: the callables, or :class:`~zoo_train.reward_process.RewardProcess` es for
            those loaded from a module or file.
        weights: their weights in the combined reward (default 1 each).
        timeout: seconds a call of a function in a process of its own may take.
    """

    names: tuple[str, ...]
    functions: tuple[RewardFn | RewardProcess, ...]
    weights: tuple[float, ...]
    timeout: float = DEFAULT_REWARD_TIMEOUT
    _warned: set[str] = dataclasses.field(default_factory=set, compare=False, repr=False)

    @classmethod
    def load(
        cls,
        specs: Sequence[str],
        weights: Sequence[float] | None = None,
        *,
        timeout: float = DEFAULT_REWARD_TIMEOUT,
    ) -> Rewards:
        """The functions of ``specs`` (see :func:`load_reward`) with ``weights``; a call of one
        from a module or file may take ``timeout`` seconds.

        Raises:
            ValueError: no function, a spec that does not load, or a weight per function
                missing.
        """
        if not specs:
            raise ValueError("GRPO needs at least one --reward (e.g. --reward answer_match).")
        if weights is not None and len(weights) != len(specs):
            raise ValueError(
                f"--reward-weights gives {len(weights)} weights for {len(specs)} reward "
                "functions; give one per --reward."
            )
        if weights is not None and not all(abs(w) <= REWARD_BOUND for w in weights):
            shown = " ".join(f"{w:g}" for w in weights)
            raise ValueError(
                f"--reward-weights {shown}: each weight must lie within ±{REWARD_BOUND:g}, "
                "past which the loss's float32 statistics of rewards overflow; use smaller "
                "weights."
            )
        loaded: list[tuple[str, RewardFn | RewardProcess]] = []
        try:
            for spec in specs:
                loaded.append(load_reward(spec, timeout=timeout))
        except BaseException:
            for _, fn in loaded:
                if isinstance(fn, RewardProcess):
                    fn.close()
            raise
        names = [n for n, _ in loaded]
        # The same function twice still gets two metric names.
        unique = [n if names.count(n) == 1 else f"{n}_{i}" for i, n in enumerate(names)]
        weights = [1.0] * len(loaded) if weights is None else weights
        return cls(
            tuple(unique),
            tuple(f for _, f in loaded),
            tuple(float(w) for w in weights),
            timeout,
        )

    def close(self) -> None:
        """End the processes of the functions that run in one (and whatever they left)."""
        for fn in self.functions:
            if isinstance(fn, RewardProcess):
                fn.close()

    def _call(
        self,
        name: str,
        fn: RewardFn | RewardProcess,
        arguments: dict[str, Any],
        interrupted: Callable[[], int | None] | None,
    ) -> Any:
        """``fn``'s rewards; a failure of any kind as :class:`RewardProcessError`'s phrase."""
        if isinstance(fn, RewardProcess):
            values = fn(arguments, timeout=self.timeout, interrupted=interrupted)
            if fn.left and name not in self._warned:
                self._warned.add(name)
                logger.warning(
                    "reward function %s left %s running after it returned; zoo ended %s, and "
                    "ends any it leaves after each call (a reward function must wait for what "
                    "it starts)",
                    name,
                    "1 process" if fn.left == 1 else f"{fn.left} processes",
                    "it" if fn.left == 1 else "them",
                )
            return values
        try:  # copies: a function that changes its arguments changes nothing of the run's
            return fn(**copy.deepcopy(arguments))
        except BaseException as e:  # SystemExit, KeyboardInterrupt raised by it: a failed call
            raise RewardProcessError(f"raised {_said(e)}") from e

    def score(
        self,
        prompts: list[Any],
        completions: list[Any],
        columns: Mapping[str, list[Any]],
        *,
        offset: int = 0,
        interrupted: Callable[[], int | None] | None = None,
    ) -> Float[np.ndarray, "N F"]:
        """Every function's reward of every completion, float64 ``[N, F]`` (NaN where a
        function returned ``None``).

        Args:
            prompts, completions: one per completion (a prompt repeated over its group).
            columns: the prompts' other columns, one value per completion.
            offset: the first row's index in the step's batch (for the error's row).
            interrupted: polled while a function in a process of its own runs: a signal
                number it returns ends the call (:class:`~zoo_train.StepInterruptedError`).

        Raises:
            RewardError: a function raised (anything, ``SystemExit`` included), did not
                return in time, or returned the wrong length, NaN, an infinity or something
                that is not a number.
            StepInterruptedError: ``interrupted`` asked to stop while a function ran.
        """
        n = len(completions)
        out = np.empty((n, len(self.functions)), np.float64)
        arguments = {"prompts": prompts, "completions": completions, **columns}
        for j, (name, fn) in enumerate(zip(self.names, self.functions, strict=True)):
            try:
                values = self._call(name, fn, arguments, interrupted)
            except RewardProcessError as e:  # any failure of user code stops the run, named
                raise RewardError(
                    f"Reward function {name} {e} (on rows {offset} to {offset + n - 1})."
                ) from e
            out[:, j] = _checked(name, values, n, offset)
        return out
