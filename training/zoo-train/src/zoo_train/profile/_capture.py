"""Capture a ``jax.profiler`` trace of chosen train steps, with the HLO that explains it."""

from __future__ import annotations

import contextlib
import json
import pathlib
import time
from collections.abc import Callable
from typing import Any

import jax

from ._hlo import parse_hlo
from ._summary import HLO_DIR, META_FILE
from ._trace import trace_files

PROFILE_DIR = "profile"


def step_annotation(step: int) -> contextlib.AbstractContextManager[Any]:
    """The marker of train step ``step`` in any trace (a no-op when nothing is tracing)."""
    return jax.profiler.StepTraceAnnotation("train", step_num=step)


def host_annotation(name: str) -> contextlib.AbstractContextManager[Any]:
    """A marker of the loop's own work in a trace: ``"eval"`` or ``"checkpoint"``."""
    return jax.profiler.TraceAnnotation(f"zoo.{name}")


class ProfileWindow:
    """Traces steps ``start..end`` (inclusive) of a run into ``out/profile/``.

    :meth:`start` starts the trace ahead of step ``start`` (when :meth:`starts` says so);
    :meth:`after` ends it once step ``end`` has finished on the device, and saves the optimized
    HLO of the programs it is given beside it, so ``zoo profile`` can say what every operation
    was. Nothing is
    traced when ``steps`` is ``None`` or ``enabled`` is false (processes other than 0).
    """

    def __init__(
        self,
        steps: tuple[int, int] | None,
        out: pathlib.Path,
        *,
        last: int,
        enabled: bool = True,
    ) -> None:
        # A window reaching past this call's last step ends with it.
        self.steps = None if steps is None or not enabled else (steps[0], min(steps[1], last))
        self.dir = out / PROFILE_DIR
        self._active = False

    def starts(self, step: int) -> bool:
        """Whether the trace starts with step ``step``: the device should be idle first, so the
        trace holds exactly the window's steps."""
        return self.steps is not None and step == self.steps[0] and not self._active

    def start(self) -> None:
        """Start the trace (after :meth:`starts` said so)."""
        self.dir.mkdir(parents=True, exist_ok=True)
        jax.profiler.start_trace(str(self.dir))
        self._active = True
        self._t0 = time.perf_counter()

    def due(self, step: int) -> bool:
        """Whether the trace ends after step ``step``: its results must be waited for."""
        return self._active and self.steps is not None and step >= self.steps[1]

    def after(
        self, step: int, programs: list[Callable[[], str]], meta: dict[str, Any]
    ) -> pathlib.Path | None:
        """End the trace after step ``step`` (its results already waited for) if it is the last
        one, saving the optimized HLO text each of ``programs`` gives and ``meta``; returns the
        capture directory then."""
        if not self.due(step):
            return None
        wall = time.perf_counter() - self._t0
        jax.profiler.stop_trace()
        self._active = False
        capture = newest_capture(self.dir)
        (capture / HLO_DIR).mkdir(exist_ok=True)
        for text in programs:
            hlo = text()
            module = parse_hlo(hlo).module or "program"
            (capture / HLO_DIR / f"{module}.txt").write_text(hlo)
        assert self.steps is not None
        steps = self.steps[1] - self.steps[0] + 1
        # The loop's own clock over the window: what the trace's categories should add up to.
        meta = {"steps": list(self.steps), "wall_ms_per_step": wall / steps * 1e3, **meta}
        (capture / META_FILE).write_text(json.dumps(meta, indent=1, default=str))
        return capture

    def close(self) -> None:
        """Stop an unfinished trace (the run ended or failed inside the window)."""
        if self._active:
            jax.profiler.stop_trace()
            self._active = False


def newest_capture(root: pathlib.Path) -> pathlib.Path:
    """The directory of the newest capture under a ``jax.profiler`` log directory: the one
    holding the newest trace file, found as ``zoo profile`` finds it."""
    files = trace_files(root)
    if not files:
        raise FileNotFoundError(f"No capture under {root}.")
    return files[0].parent
