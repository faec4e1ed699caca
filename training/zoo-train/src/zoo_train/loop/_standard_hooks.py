"""Hooks: what the loop does between steps, each at its own interval.

A hook is a function of the step that just finished (:class:`StepEnd`), added with
``hooks.add(fn, every=N)``: it runs after every ``N``-th step and after the run's last one
(``every=0``: only after the last; ``every=None``: after every step). Hooks run in the order
they were added and may leave results for the ones after them (an evaluation's loss ranks the
checkpoint saved at the same step). The standard hooks are the profile window, evaluation,
checkpoints and the stop request, in that order.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Callable
from typing import NoReturn

import jax

from .._errors import StoppedBySignalError
from ..profile import host_annotation
from ._evaluate import EvalData, evaluate
from ._hook import StepEnd
from ._start import Run, report_evaluation


@dataclasses.dataclass(frozen=True)
class _Hook:
    fn: Callable[[StepEnd], None]
    every: int | None
    before: Callable[[int], None] | None


class Hooks:
    """The hooks of a run that ends after step ``end``."""

    def __init__(self, end: int) -> None:
        self.end = end
        self._hooks: list[_Hook] = []

    def add(
        self,
        fn: Callable[[StepEnd], None],
        *,
        every: int | None = None,
        before: Callable[[int], None] | None = None,
    ) -> None:
        """Run ``fn`` after every ``every``-th step and the last (``None``: every step; ``0``:
        the last only); ``before(step)``, if given, runs before every step."""
        self._hooks.append(_Hook(fn, every, before))

    def before_step(self, step: int) -> None:
        """Before step ``step`` is dispatched."""
        for hook in self._hooks:
            if hook.before is not None:
                hook.before(step)

    def after_step(self, end: StepEnd) -> None:
        """After ``end.step`` was dispatched (its metrics may not be read yet)."""
        for hook in self._hooks:
            every = hook.every
            if every is None or end.step == self.end or (every and end.step % every == 0):
                hook.fn(end)


def standard_hooks(run: Run, eval_data: EvalData | None) -> Hooks:
    """The profile window, evaluation every ``eval_every`` steps (with ``eval_data``),
    checkpoints every ``checkpoint_every`` steps and the stop request, in that order."""
    hooks = Hooks(run.end)
    hooks.add(
        functools.partial(_capture_profile, run), before=functools.partial(_start_profile, run)
    )
    if eval_data is not None:
        hooks.add(functools.partial(_evaluate, run, eval_data), every=run.config.eval_every)
    hooks.add(functools.partial(_save, run), every=run.config.checkpoint_every)
    hooks.add(functools.partial(_stop_if_asked, run))
    return hooks


def _start_profile(run: Run, step: int) -> None:
    if run.profile.starts(step):
        run.metrics.drain()
        jax.block_until_ready(run.now.state)  # the device idle: the trace holds the window alone
        run.profile.start()


def _capture_profile(run: Run, end: StepEnd) -> None:
    if not run.profile.due(end.step):
        return
    jax.block_until_ready(run.now.state)
    hlo = functools.partial(run.train_step.hlo, run.now.batch, run.now.state)
    capture = run.profile.after(end.step, [hlo], run.profile_meta)
    steps = run.config.profile or (0, 0)
    run.progress.write(
        f"zoo: profile of steps {steps[0]}–{steps[1]} in {capture}; read it with "
        f"`zoo profile {run.out}`"
    )


def _evaluate(run: Run, eval_data: EvalData, end: StepEnd) -> None:
    run.metrics.drain()
    t_eval = time.perf_counter()
    with host_annotation("eval"):
        evaluated = evaluate(
            run.eval_step,
            run.now.state,
            eval_data,
            run.eval_rows,
            run.config.eval_batches,
            run.unit,
        )
    run.now.last_eval = report_evaluation(end.step, evaluated, run.record, run.progress)
    run.window.pause(time.perf_counter() - t_eval)  # evaluation is not training time
    end.evaluated = evaluated


def _save(run: Run, end: StepEnd) -> None:
    run.save(end.step, end.data_state, end.evaluated)
    end.saved = True


def stop_before_step(run: Run, last: StepEnd | None, signum: int) -> NoReturn:
    """A stop signal came while the next step's batch was being made: save the last step taken
    in this call (unless saved already) and stop, as after a step.

    Raises:
        StoppedBySignalError: always.
    """
    if last is not None and not last.saved:
        run.save(last.step, last.data_state, last.evaluated)
    run.checkpointer.wait()
    saved = last is not None or run.resumed  # else: a new run that took no step
    raise StoppedBySignalError(step=run.now.step, signum=signum, saved=saved)


def _stop_if_asked(run: Run, end: StepEnd) -> None:
    """SIGTERM, Ctrl-C or SIGHUP: save this step (if not saved already) and stop."""
    halt = run.stop.stop_step(end.step)
    if halt is None or end.step < halt[0] or end.step >= run.end:
        return
    if not end.saved:
        run.save(end.step, end.data_state, end.evaluated)
    run.checkpointer.wait()
    raise StoppedBySignalError(step=end.step, signum=halt[1], saved=True)
