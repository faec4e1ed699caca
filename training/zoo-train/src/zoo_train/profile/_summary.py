"""Where the time of the profiled steps went: per step, by category, and the top operations."""

from __future__ import annotations

import dataclasses
import json
import pathlib
from collections import defaultdict
from typing import Any

from ._hlo import HloProgram, parse_hlo
from ._trace import HOST_CATEGORIES, Span, Trace, read_trace, trace_files

HLO_DIR = "zoo_hlo"  # beside the trace: the optimized HLO of the programs it ran
META_FILE = "zoo_profile.json"
# Operations that only run others (each timed on its own): not counted themselves.
_CONTAINERS = frozenset({"while", "conditional", "cond", "call"})
IDLE = "host/idle"
# A program running on the device before any of its operations was timed.
BETWEEN_OPS = "program running, no op timed"
HOST, PROGRAM = "<host>", "<program>"
MATMUL = "matmul"
OTHER = "other fused ops"
EVAL = "eval"
ATTENTION = "attention"
GROUPED_MATMUL = "grouped matmul"
LINEAR_ATTENTION = "linear attention"
CROSS_ENTROPY = "cross entropy"
#: The categories of kernel calls, ``KIND: KERNEL VERSION`` rows: listed first.
KERNEL_KINDS = (ATTENTION, GROUPED_MATMUL, LINEAR_ATTENTION, CROSS_ENTROPY)


@dataclasses.dataclass
class Summary:
    """A trace's step time, split by category (milliseconds per step).

    Attributes:
        source: the trace file.
        steps: steps measured (step marker to step marker).
        step_ms: mean time per step.
        categories: ms per step by category, ``attention: KERNEL VERSION``, ``grouped
            matmul: KERNEL VERSION`` and ``cross entropy: KERNEL VERSION`` rows first; they
            sum to ``step_ms``.
        top_ops: the operations with the most time: name, category, calls and ms per step.
        meta: what the capture recorded (steps, kernel, modules).
    """

    source: str
    steps: int
    step_ms: float
    categories: dict[str, float]
    top_ops: list[dict[str, Any]]
    meta: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _programs(capture: pathlib.Path) -> dict[str, HloProgram]:
    programs = {}
    for file in sorted((capture / HLO_DIR).glob("*.txt")):
        program = parse_hlo(file.read_text())
        programs[program.module or file.stem] = program
    return programs


def _meta(capture: pathlib.Path) -> dict[str, Any]:
    file = capture / META_FILE
    return json.loads(file.read_text()) if file.exists() else {}


class _Classifier:
    def __init__(self, programs: dict[str, HloProgram], meta: dict[str, Any]) -> None:
        self.programs = programs
        self.eval_modules = set(meta.get("eval_modules", []))
        self._cache: dict[tuple[str, str], str | None] = {}

    def _program(self, op: Span) -> HloProgram | None:
        if op.module in self.programs:
            return self.programs[op.module]
        for program in self.programs.values():  # device planes may not name the module
            if op.name in program.instructions:
                return program
        return None

    def __call__(self, op: Span) -> str | None:
        key = (op.module, op.name)
        if key not in self._cache:
            self._cache[key] = self._classify(op)
        return self._cache[key]

    def _classify(self, op: Span) -> str | None:
        """The op's category; ``None`` for a loop or branch, whose body is timed op by op."""
        program = self._program(op)
        if program is None:  # no HLO saved with the trace: go by the name alone
            low = op.name.lower()
            if low.split(".")[0] in _CONTAINERS:
                return None
            if op.module in self.eval_modules:
                return EVAL
            return MATMUL if any(t in low for t in ("dot", "convolution", "gemm")) else OTHER
        if program.instructions.get(op.name) is not None and (
            program.instructions[op.name].opcode in _CONTAINERS
        ):
            return None
        if op.module in self.eval_modules:
            return EVAL
        kernel = program.kernel_of(op.name)
        if kernel is not None:
            return f"{kernel[0]}: {kernel[1]}"
        return MATMUL if program.is_matmul(op.name) else OTHER


def _window(trace: Trace) -> tuple[float, float, int]:
    """From the first step marker to the end of the last operation: the loop starts a capture
    with the device idle and ends it once the last step has finished."""
    if not trace.ops:
        raise ValueError(f"{trace.path} holds no XLA operations.")
    end = max(op.end for op in trace.ops)
    if trace.steps:
        return trace.steps[0].start, end, len(trace.steps)
    return trace.ops[0].start, end, 1  # no step markers: the whole trace as one step


def _layer(span: Span) -> int:
    # What covers an instant: an operation before a host annotation (eval, checkpoint) before a
    # program merely running (the runtime between its operations).
    return {HOST: 1, PROGRAM: 2}.get(span.module, 0)


def _attribute(
    spans: list[tuple[Span, str]], start: float, end: float
) -> tuple[dict[str, float], dict[str, float]]:
    """Time by category and by operation over [start, end).

    Each instant goes to the spans of the first layer covering it (operations, then host
    annotations, then running programs), shared equally when several cover it at once (XLA:CPU
    runs independent operations side by side); an instant nothing covers is idle. An instant
    inside a running program that no operation covers goes to the operation that ended last
    (ties: the later in ``spans``): XLA:CPU's event of an asynchronous operation (a dot on the
    Eigen thread pool) ends when the work is handed out, and the work runs until the next
    operation starts.
    """
    edges: list[tuple[float, int, int]] = []
    for i, (span, _) in enumerate(spans):
        a, b = max(span.start, start), min(span.end, end)
        if b > a:
            edges += [(a, 1, i), (b, -1, i)]
    edges.sort()  # by time, ends before starts, then by span
    by_category: dict[str, float] = defaultdict(float)
    by_op: dict[str, float] = defaultdict(float)
    active: list[set[int]] = [set(), set(), set()]
    # The operation that ended last, counting those that ended before the window opened.
    before = [(span.end, i) for i, (span, _) in enumerate(spans) if not _layer(span)]
    before = [(e, i) for e, i in before if e <= start]
    last_op: int | None = max(before)[1] if before else None
    t = start
    for time, kind, i in edges:
        if time > t:
            gap = time - t
            shown = next((layer for layer in active if layer), None)
            if shown is active[2] and last_op is not None:
                shown = {last_op}
            if shown is None:
                by_category[IDLE] += gap
            else:
                for j in shown:
                    by_category[spans[j][1]] += gap / len(shown)
                    if _layer(spans[j][0]) == 0:
                        by_op[spans[j][0].name] += gap / len(shown)
            t = time
        layer = active[_layer(spans[i][0])]
        if kind > 0:
            layer.add(i)
        else:
            layer.discard(i)
            if _layer(spans[i][0]) == 0:
                last_op = i
    if end > t:
        by_category[IDLE] += end - t
    return by_category, by_op


def summarize(path: str | pathlib.Path, *, top: int = 10) -> Summary:
    """The :class:`Summary` of the newest trace under ``path`` (a run directory, its
    ``profile/`` directory, a capture directory or an ``*.xplane.pb`` file)."""
    path = pathlib.Path(path)
    files = trace_files(path)
    if not files:
        raise FileNotFoundError(
            f"No profiler trace (*.xplane.pb) under {path}; capture one with "
            "`zoo train --profile START:END`."
        )
    trace = read_trace(files[0])
    capture = files[0].parent
    meta = _meta(capture)
    classify = _Classifier(_programs(capture), meta)
    start, end, steps = _window(trace)
    spans = [(op, c) for op in trace.ops if (c := classify(op)) is not None]
    spans += [(dataclasses.replace(h, module=HOST), HOST_CATEGORIES[h.name]) for h in trace.host]
    spans += [(dataclasses.replace(p, module=PROGRAM), BETWEEN_OPS) for p in trace.programs]
    by_category, by_op = _attribute(spans, start, end)
    calls: dict[str, int] = defaultdict(int)
    category_of: dict[str, str] = {}
    for op, category in spans:
        if start <= op.start < end:
            calls[op.name] += 1
            category_of[op.name] = category
    per_step = lambda ns: ns / steps / 1e6
    order = sorted(by_category, key=lambda c: (not c.startswith(KERNEL_KINDS), -by_category[c]))
    top_ops = [
        {
            "name": name,
            "category": category_of.get(name, ""),
            "calls": calls.get(name, 0) / steps,
            "ms": per_step(ns),
        }
        for name, ns in sorted(by_op.items(), key=lambda kv: -kv[1])[:top]
    ]
    return Summary(
        source=str(files[0]),
        steps=steps,
        step_ms=per_step(end - start),
        categories={c: per_step(by_category[c]) for c in order},
        top_ops=top_ops,
        meta=meta,
    )
