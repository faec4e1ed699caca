"""What a compiled step's peak is made of, read from XLA's own buffer assignment.

``memory_analysis()`` gives totals only. XLA writes the rest when asked to dump a compile
(``xla_dump_to``, passed as a compiler option for that one compile): the buffer assignment
(every value, its size and the allocation it lives in: an argument, an output or the
temporaries) and the live ranges of the values over the scheduled program. Sweeping the live
ranges gives the moment of the peak and what is live then, which adds up to XLA's own peak; each
buffer is named by the ``op_name`` of the instruction that defines it, which carries the
``jax.named_scope`` path it was traced under (arguments: their path in the step's arguments).
The same files are written when the step does not fit, so an out-of-memory compile is explained
too.
"""

from __future__ import annotations

import dataclasses
import pathlib
import re
from collections.abc import Sequence
from typing import Any

from ..profile import parse_hlo

# `allocation 12: size 4096, color 1, parameter 3, shape |...| at ShapeIndex {}, maybe-live-out:`
_ALLOCATION = re.compile(r"^allocation (\d+): size (\d+)(.*):\s*$")
_COLOR = re.compile(r"\bcolor (\d+)")
_PARAMETER = re.compile(r"\bparameter (\d+)")
# ` value: <31 copy-start{0} (phi) @1> (size=67108864,offset=0): f32[2048,8192]{1,0:T(8,128)}`
_VALUE = re.compile(
    r"^ value: <\d+ ([^\s{>]+)(\{[\d,]*\})?[^>]*> \(size=(\d+),offset=(\d+)\): (\S+)"
)
# `    fusion.532{1}:560-1578` in the live range's BufferLiveRange section.
_RANGE = re.compile(r"^\s+(\S+\{[\d,]*\}):(\d+)-(\d+)\s*$")
_ARGUMENT = re.compile(r"^[A-Za-z_]\w*\[(\d+)\]$")
_SUFFIX = "-buffer-assignment.txt"
_PART = re.compile(r"^(batch|state\.\w+)")

ARGUMENT, OUTPUT, TEMPORARY = "argument", "output", "temporary"


def dump_options(directory: str | pathlib.Path) -> dict[str, str]:
    """Compiler options that make XLA write one compile's buffer assignment into
    ``directory`` (``jax.stages.Lowered.compile(compiler_options=...)``)."""
    return {"xla_dump_to": str(directory)}


@dataclasses.dataclass(frozen=True)
class PeakBuffer:
    """One buffer live at the peak.

    Attributes:
        bytes: its size on the device.
        shape: its HLO shape, e.g. ``f32[8192,128256]``.
        kind: ``"argument"``, ``"output"`` or ``"temporary"``.
        name: an argument's path, else the ``op_name`` of the instruction that defines it
            (the named scopes it was traced under; ``jit(step)/`` left out), else that
            instruction.
        instruction: the HLO value (``fusion.532{1}``).
    """

    bytes: int
    shape: str
    kind: str
    name: str
    instruction: str

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class PeakBreakdown:
    """What is live on one device at the moment of the step's peak (its default memory: HBM).

    Attributes:
        peak_bytes: everything live then; equal to XLA's ``peak_memory_in_bytes`` up to the
            few KiB it counts in other memories.
        argument_bytes, output_bytes, temporary_bytes: its parts by kind.
        buffers: every buffer live then, largest first.
    """

    peak_bytes: int
    argument_bytes: int
    output_bytes: int
    temporary_bytes: int
    buffers: tuple[PeakBuffer, ...]

    def largest(self, n: int, kind: str | None = None) -> list[PeakBuffer]:
        """The ``n`` largest buffers (of ``kind`` only, when given)."""
        return [b for b in self.buffers if kind is None or b.kind == kind][:n]

    def by_name(self, kind: str | None = None) -> list[tuple[str, int, int]]:
        """``(name, bytes, buffers)`` summed over buffers of the same name, largest first: a
        scan's per-layer values and an optimizer's per-leaf ones add up under one name."""
        sums: dict[str, list[int]] = {}
        for b in self.buffers:
            if kind is None or b.kind == kind:
                entry = sums.setdefault(b.name, [0, 0])
                entry[0] += b.bytes
                entry[1] += 1
        return sorted(((k, v[0], v[1]) for k, v in sums.items()), key=lambda r: -r[1])

    def argument_parts(self) -> dict[str, int]:
        """The arguments live at the peak by part of the step's arguments, largest first:
        ``{"state.opt_state": ..., "state.params": ..., "batch": ...}`` (names as
        :func:`zoo_train.aot.argument_names` gives them; others by their own name)."""
        parts: dict[str, int] = {}
        for b in self.buffers:
            if b.kind == ARGUMENT:
                found = _PART.match(b.name)
                part = found.group(1) if found else b.name
                parts[part] = parts.get(part, 0) + b.bytes
        return dict(sorted(parts.items(), key=lambda kv: -kv[1]))

    def as_dict(self, largest: int = 20) -> dict[str, Any]:
        """The ``peak`` block of ``zoo compile --json``: the parts and the largest buffers."""
        return {
            "bytes": self.peak_bytes,
            "argument_bytes": self.argument_bytes,
            "output_bytes": self.output_bytes,
            "temporary_bytes": self.temporary_bytes,
            "argument_parts": self.argument_parts(),
            "buffers": len(self.buffers),
            "largest": [b.as_dict() for b in self.largest(largest)],
            "largest_temporaries": [b.as_dict() for b in self.largest(largest, TEMPORARY)],
        }


def _module_prefix(directory: pathlib.Path) -> pathlib.Path | None:
    """The dumped module with the largest buffer assignment (the step: a compile may dump
    small helper programs beside it), as the common prefix of its files."""
    found = list(directory.glob(f"*after_optimizations{_SUFFIX}"))
    if not found:
        return None
    biggest = max(found, key=lambda p: p.stat().st_size)
    return biggest.with_name(biggest.name[: -len(_SUFFIX)])


def _op_names(hlo: pathlib.Path) -> dict[str, str]:
    """Each instruction's ``op_name``; a loop body's parameter (the state a ``while`` carries
    from one iteration to the next, which has none) is named after its loop."""
    program = parse_hlo(hlo.read_text())
    names = {n: i.op_name for n, i in program.instructions.items() if i.op_name}
    for loop in program.instructions.values():
        if loop.opcode != "while" or not loop.op_name:
            continue
        for computation in loop.calls:
            for name in program.computations.get(computation, []):
                if program.instructions[name].opcode == "parameter":
                    names.setdefault(name, f"{loop.op_name} (loop state)")
    return names


@dataclasses.dataclass(frozen=True)
class _Value:
    """A value of the default memory: its size, shape, kind, parameter number (arguments) and
    place (allocation, offset); values in one place are one buffer (aliases, a loop's state)."""

    size: int
    shape: str
    kind: str
    parameter: int | None
    place: tuple[int, int]


def _values(path: pathlib.Path) -> dict[str, _Value]:
    """Each value of the default memory, by its key in the live ranges (``fusion.532{1}``)."""
    values: dict[str, _Value] = {}
    kind, parameter, default, allocation = TEMPORARY, None, True, -1
    with path.open() as f:
        for line in f:
            found = _ALLOCATION.match(line)
            if found:
                allocation, attrs = int(found.group(1)), found.group(3)
                color = _COLOR.search(attrs)
                default = color is None or color.group(1) == "0"
                param = _PARAMETER.search(attrs)
                parameter = None if param is None else int(param.group(1))
                kind = (
                    ARGUMENT
                    if param is not None
                    else OUTPUT
                    if "maybe-live-out" in attrs
                    else TEMPORARY
                )
                continue
            found = _VALUE.match(line)
            if found and default:
                key = found.group(1) + (found.group(2) or "{}")
                shape = found.group(5)
                shape = "tuple" if shape.startswith("(") else shape.split("{")[0]
                place = (allocation, int(found.group(4)))
                values[key] = _Value(int(found.group(3)), shape, kind, parameter, place)
    return values


def _ranges(path: pathlib.Path) -> list[tuple[str, int, int]]:
    ranges = []
    inside = False
    with path.open() as f:
        for line in f:
            if not inside:
                inside = line.strip() == "BufferLiveRange:"
                continue
            found = _RANGE.match(line)
            if found:
                ranges.append((found.group(1), int(found.group(2)), int(found.group(3))))
            elif line.strip() and not line.startswith("    "):
                break  # the next section
    return ranges


def _display(op_name: str) -> str:
    return op_name.split("/", 1)[1] if op_name.startswith("jit(") and "/" in op_name else op_name


def _merged(spans: list[tuple[int, int, str]], values: dict[str, _Value]) -> list[tuple]:
    """One place's live spans merged where they overlap: ``(start, stop, bytes, spans)``, the
    bytes the largest of the values sharing the span."""
    out: list[tuple] = []
    for start, stop, key in sorted(spans):
        if out and start <= out[-1][1]:
            s0, s1, size, inner = out[-1]
            out[-1] = (s0, max(s1, stop), max(size, values[key].size), [*inner, (start, stop, key)])
        else:
            out.append((start, stop, values[key].size, [(start, stop, key)]))
    return out


def read_dump(
    directory: str | pathlib.Path, argument_names: Sequence[str] | None = None
) -> PeakBreakdown | None:
    """The peak of the compile dumped into ``directory`` (see :func:`dump_options`), or
    ``None`` when XLA wrote no buffer assignment or live ranges there.

    ``argument_names`` name the program's parameters in order (the step's flattened
    arguments); without them an argument is named as the program names it (``arrays[12]``).
    """
    prefix = _module_prefix(pathlib.Path(directory))
    if prefix is None:
        return None
    live = prefix.with_name(prefix.name + "-live-range.txt")
    hlo = prefix.with_name(prefix.name + ".txt")
    if not live.exists():
        return None
    values = _values(prefix.with_name(prefix.name + _SUFFIX))
    places: dict[tuple[int, int], list[tuple[int, int, str]]] = {}
    for key, start, stop in _ranges(live):
        if key in values:
            places.setdefault(values[key].place, []).append((start, stop, key))
    spans = [span for p in places.values() for span in _merged(p, values)]
    if not spans:
        return None
    end = max(span[1] for span in spans) + 2
    delta = [0] * (end + 1)
    for start, stop, size, _ in spans:
        delta[start] += size
        delta[stop + 1] -= size
    total, peak, when = 0, -1, 0
    for t in range(end):
        total += delta[t]
        if total > peak:
            peak, when = total, t
    op_names = _op_names(hlo) if hlo.exists() else {}
    buffers = []
    for start, stop, size, inner in spans:
        if not start <= when <= stop:
            continue
        # Named after the largest value of the buffer live at the peak (any, in a gap).
        holders = [k for s0, s1, k in inner if s0 <= when <= s1] or [k for _, _, k in inner]
        key = max(holders, key=lambda k: values[k].size)
        value = values[key]
        instruction = key.split("{")[0]
        name = op_names.get(instruction, "")
        if value.kind == ARGUMENT:
            index = value.parameter
            found = _ARGUMENT.match(name)
            if found is not None:
                index = int(found.group(1))
            if argument_names is not None and index is not None and index < len(argument_names):
                name = argument_names[index]
        buffers.append(
            PeakBuffer(size, value.shape, value.kind, _display(name) or instruction, key)
        )
    buffers.sort(key=lambda b: (-b.bytes, b.name))
    parts = {k: sum(b.bytes for b in buffers if b.kind == k) for k in (ARGUMENT, OUTPUT, TEMPORARY)}
    return PeakBreakdown(peak, parts[ARGUMENT], parts[OUTPUT], parts[TEMPORARY], tuple(buffers))
