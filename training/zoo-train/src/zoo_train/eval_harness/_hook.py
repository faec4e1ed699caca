"""Benchmarks while a model trains: a loop hook that runs lm-eval tasks on the model of the
state at chosen steps and records their scores as ``lm_eval/<task>/<metric>``."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from ..loop import METRICS_FILE, LoopView, StepEnd, read_metrics
from ._lm import ZooLM
from ._tasks import find_tasks, run_tasks, task_metrics

#: The prefix of the hook's metrics.
PREFIX = "lm_eval"


class HarnessHook:
    """Runs ``tasks`` after every ``every``-th step and the run's last (``steps``), and before
    the first step with ``at_start``: ``train(..., hooks=[(hook, None)])``.

    A step whose scores ``metrics.jsonl`` already holds (a resumed run) is not run again. A task
    that fails is reported once and left out from then on; the run goes on.
    """

    def __init__(
        self,
        tasks: Sequence[str],
        tokenizer: Any,
        *,
        steps: int,
        every: int = 0,
        at_start: bool = False,
        include_path: str | None = None,
        limit: int | None = None,
        batch_size: int = 16,
        stop_tokens: Sequence[int] | None = None,
    ) -> None:
        self.tasks = list(tasks)
        self.tokenizer = tokenizer
        self.steps = steps
        self.every = every
        self.at_start = at_start
        self.include_path = include_path
        self.limit = limit
        self.batch_size = batch_size
        self.stop_tokens = stop_tokens
        self.failed: set[str] = set()
        self._done: set[int] = set()
        self._lm: ZooLM | None = None
        self._manager: Any = None

    def due(self, step: int) -> bool:
        """Whether the tasks run after ``step``."""
        chosen = step == self.steps or (self.every > 0 and step % self.every == 0)
        return chosen and step not in self._done

    def start(self, view: LoopView, step: int) -> None:
        """Before this call's first step: the steps already scored, then step 0 if asked."""
        path = view.out / METRICS_FILE
        if path.is_file():
            self._done = {
                int(r["step"])
                for r in read_metrics(path)
                if any(str(k).startswith(f"{PREFIX}/") for k in r)
            }
        if self.at_start and step == 0 and 0 not in self._done:
            self.evaluate(view, 0)

    def after_step(self, end: StepEnd) -> None:
        """Score the tasks after each step they are due at."""
        if end.view is not None and self.due(end.step):
            self.evaluate(end.view, end.step)

    def evaluate(self, view: LoopView, step: int) -> dict[str, float]:
        """Run the tasks on the model after ``step``; record and return their scores."""
        view.drain()
        started = time.perf_counter()
        lm = self._model_lm(view)
        scores: dict[str, float] = {}
        for task in [t for t in self.tasks if t not in self.failed]:
            try:
                results = run_tasks(
                    lm,
                    [task],
                    include_path=self.include_path,
                    limit=self.limit,
                    bootstrap_iters=0,
                    task_manager=self._manager,
                )
            except Exception as e:
                self.failed.add(task)
                view.write(f"zoo: lm-eval task {task} failed at step {step} and is skipped: {e}")
                continue
            scores.update(task_metrics(results, PREFIX))
        lm.model = None  # the next step donates these arrays
        self._done.add(step)
        if scores:
            view.record({"step": step, **scores})
            shown = ", ".join(f"{k[len(PREFIX) + 1 :]} {v:.4g}" for k, v in scores.items())
            view.write(f"zoo: step {step}: {shown}")
        view.pause(time.perf_counter() - started)  # benchmarks are not training time
        return scores

    def _model_lm(self, view: LoopView) -> ZooLM:
        if self._manager is None:
            self._manager = find_tasks(self.tasks, self.include_path)
        if self._lm is None:
            self._lm = ZooLM(
                view.model(),
                self.tokenizer,
                mesh=view.mesh,
                rules=view.rules,
                batch_size=self.batch_size,
                stop_tokens=self.stop_tokens,
            )
        else:
            self._lm.model = view.model()
        return self._lm
