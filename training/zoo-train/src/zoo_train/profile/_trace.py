"""The events of a ``jax.profiler`` trace: steps, the XLA operations timed, host annotations.

The trace is XPlane data (``*.xplane.pb``), read with ``jax.profiler.ProfileData``: the reader
that ships with jaxlib, the same version that wrote the trace, with no other dependency.
(XProf's converters would be the alternative; their wheel is ~100 MB with Cloud Storage and
DuckDB dependencies, and their operation tools need HLO protos that the CPU client does not
record, so zoo reads the optimized HLO it saves beside the trace instead.)
"""

from __future__ import annotations

import dataclasses
import pathlib
import warnings
from collections.abc import Iterator
from typing import Any, Protocol

import jax

XPLANE_SUFFIX = ".xplane.pb"
STEP_EVENT = "train"  # the jax.profiler.StepTraceAnnotation of every train step
# A whole execution of a program: the CPU client's wait for it, a device's "XLA Modules" line.
PROGRAM_EVENT = "ThunkExecutor::Execute (wait for completion)"
# Host annotations of the loop's other work, shown as their own categories.
HOST_CATEGORIES = {"zoo.eval": "eval", "zoo.checkpoint": "checkpoint"}


@dataclasses.dataclass(frozen=True)
class Span:
    """A timed interval (nanoseconds since the trace's start)."""

    name: str
    start: float
    duration: float
    module: str = ""
    step: int | None = None

    @property
    def end(self) -> float:
        return self.start + self.duration


@dataclasses.dataclass
class Trace:
    """What :func:`read_trace` found: step markers, XLA operations and host annotations."""

    path: pathlib.Path
    steps: list[Span]
    ops: list[Span]
    host: list[Span]
    programs: list[Span]


def trace_files(path: pathlib.Path) -> list[pathlib.Path]:
    """The XPlane files under ``path`` (a file, a capture directory or a run directory),
    newest capture first."""
    if path.is_file():
        return [path]
    files = sorted(path.rglob(f"*{XPLANE_SUFFIX}"), key=lambda p: p.stat().st_mtime, reverse=True)
    return files


class _Event(Protocol):
    """What is read of a profile event (jaxlib's profile types carry no type information)."""

    @property
    def name(self) -> str: ...
    @property
    def start_ns(self) -> float: ...
    @property
    def duration_ns(self) -> float: ...


# A stat's value is whatever the profile recorded (a number or a string): callers convert it.
def _stats(event: _Event) -> dict[str, Any]:
    return dict(getattr(event, "stats", ()))


def _events(data: jax.profiler.ProfileData) -> Iterator[tuple[str, str, _Event]]:
    for plane in data.planes:
        for line in plane.lines:
            for event in line.events:
                yield plane.name, line.name, event


def read_trace(file: pathlib.Path) -> Trace:
    """Steps, operations, host annotations and program executions of one ``*.xplane.pb`` file.

    An operation is an event that names its HLO instruction (``hlo_op``, as the CPU client
    records them) or one on a device plane's "XLA Ops" line (TPU, GPU).
    """
    data = jax.profiler.ProfileData.from_file(str(file))
    steps: list[Span] = []
    ops: list[Span] = []
    host: list[Span] = []
    programs: list[Span] = []
    with warnings.catch_warnings():
        # jaxlib 0.12 builds its event-stats type on first use and Python 3.12 warns that the
        # type has no __module__; where warnings are errors (-W error, the test suites) that
        # warning, raised inside the binding, aborts the process instead of raising.
        warnings.simplefilter("ignore", DeprecationWarning)
        for plane, line, event in _events(data):
            name = event.name
            start, duration = float(event.start_ns), float(event.duration_ns)
            stats = _stats(event)
            if name == STEP_EVENT and "step_num" in stats:
                steps.append(Span(name, start, duration, step=int(stats["step_num"])))
            elif name in HOST_CATEGORIES:
                host.append(Span(name, start, duration))
            elif name == PROGRAM_EVENT or (plane.startswith("/device:") and line == "XLA Modules"):
                programs.append(Span(name, start, duration))
            elif "hlo_op" in stats or (plane.startswith("/device:") and line == "XLA Ops"):
                module = str(stats.get("hlo_module", ""))
                ops.append(Span(str(stats.get("hlo_op", name)), start, duration, module=module))
    steps.sort(key=lambda s: s.start)
    ops.sort(key=lambda s: s.start)
    return Trace(path=file, steps=steps, ops=ops, host=host, programs=programs)
