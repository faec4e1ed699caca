"""What each operation of a compiled XLA program is: read from its optimized HLO text.

A trace names the operations it timed (``fusion.12``, ``dot.3``) but not what they compute. The
optimized HLO says it: each instruction's opcode, the computation a fusion calls, and the
``op_name`` metadata, which carries the ``jax.named_scope`` path the operation was traced under
(``jit(step)/…/zoo_attention.xla-1.1.0/dot_general``). Only the few fields needed are read.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator

# `%name = SHAPE opcode(operands), attr=..., metadata={op_name="..." ...}`; SHAPE may be a tuple,
# whose elements carry layouts in parentheses and `/*index=5*/` comments.
_NAME = re.compile(r"^\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=\s*")
_OPCODE = re.compile(r"\s+([\w\-]+)\(")
_COMPUTATION = re.compile(r"^\s*(?:ENTRY\s+)?%?([\w.\-]+)\s+\(.*\)\s*->\s*.*\{\s*$")
_MODULE = re.compile(r"^HloModule\s+([\w.\-]+)")
_CALLS = re.compile(r"(?:calls|to_apply|body|condition)=%?([\w.\-]+)")
_OP_NAME = re.compile(r'op_name="([^"]*)"')
_TARGET = re.compile(r'custom_call_target="([^"]*)"')
# The scopes zoo_attention runs every kernel call in: `zoo_attention.{kernel}-{version}` for
# attention, `zoo_attention.grouped_matmul.{kernel}-{version}` for grouped matmuls,
# `zoo_attention.linear_attention.{kernel}-{version}` for linear attention and
# `zoo_attention.cross_entropy.{kernel}-{version}` for the loss's fused cross entropy.
_KERNEL_SCOPE = re.compile(
    r"zoo_attention\.(grouped_matmul\.|linear_attention\.|cross_entropy\.)?"
    r"([A-Za-z0-9_]+)-([0-9][A-Za-z0-9.+]*)"
)
_KINDS = {
    None: "attention",
    "grouped_matmul.": "grouped matmul",
    "linear_attention.": "linear attention",
    "cross_entropy.": "cross entropy",
}

_MATMUL_OPCODES = frozenset({"dot", "convolution"})
_MATMUL_TARGETS = ("matmul", "gemm", "dot", "conv")


@dataclasses.dataclass(frozen=True)
class Instruction:
    """One HLO instruction: ``opcode``, the computations it calls and its ``op_name``."""

    name: str
    opcode: str
    calls: tuple[str, ...]
    op_name: str
    target: str = ""


@dataclasses.dataclass
class HloProgram:
    """The instructions of one optimized HLO module, by name, grouped by computation."""

    module: str
    instructions: dict[str, Instruction]
    computations: dict[str, list[str]]

    def kernel_of(self, op: str) -> tuple[str, str] | None:
        """``("attention", "xla 1.1.0")``, ``("grouped matmul", "megablox 0.1.0")`` or
        ``("cross entropy", "fused_xla 1.3.0")`` when ``op`` runs inside a zoo kernel's named
        scope."""
        ins = self.instructions.get(op)
        if ins is None:
            return None
        found = _KERNEL_SCOPE.search(ins.op_name)
        if not found:
            return None
        return _KINDS[found.group(1)], f"{found.group(2)} {found.group(3)}"

    def kernel(self, op: str) -> str | None:
        """``"xla 1.1.0"`` when ``op`` runs inside a zoo kernel's named scope (of any kind)."""
        found = self.kernel_of(op)
        return None if found is None else found[1]

    def is_matmul(self, op: str) -> bool:
        """Whether ``op`` is a matrix multiply or a fusion built around one."""
        seen: set[str] = set()

        def has_matmul(ins: Instruction) -> bool:
            if ins.opcode in _MATMUL_OPCODES:
                return True
            if ins.opcode == "custom-call" and any(
                t in ins.target.lower() for t in _MATMUL_TARGETS
            ):
                return True
            if ins.opcode not in ("fusion", "call"):
                return False  # a while loop's body is timed op by op, not as the loop
            for comp in ins.calls:
                if comp in seen:
                    continue
                seen.add(comp)
                for name in self.computations.get(comp, []):
                    if has_matmul(self.instructions[name]):
                        return True
            return False

        ins = self.instructions.get(op)
        return ins is not None and has_matmul(ins)


def _instruction(line: str) -> tuple[str, str] | None:
    """The name and opcode of an instruction line, or ``None`` for any other line."""
    found = _NAME.match(line)
    if found is None:
        return None
    at = found.end()
    if line.startswith("(", at):  # a tuple shape: skip to its closing parenthesis
        depth = 0
        for i in range(at, len(line)):
            depth += {"(": 1, ")": -1}.get(line[i], 0)
            if depth == 0:
                at = i + 1
                break
        else:
            return None
    else:
        space = line.find(" ", at)
        if space < 0:
            return None
        at = space
    opcode = _OPCODE.match(line, at)
    return None if opcode is None else (found.group(1), opcode.group(1))


def _joined_lines(text: str) -> Iterator[str]:
    """The lines of HLO text, with an instruction that runs over several lines joined into one.

    A custom call's frontend attributes may hold text with line breaks (splash attention's
    Pallas calls carry their block sizes as JSON there), so its ``metadata={op_name=...}`` is on
    a later line. An instruction line with more ``{`` than ``}`` takes the lines that follow
    until they balance (never another instruction).
    """
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line, i = lines[i], i + 1
        if _instruction(line):
            while line.count("{") > line.count("}") and i < len(lines):
                if _instruction(lines[i]):
                    break
                line, i = f"{line} {lines[i].strip()}", i + 1
        yield line


def parse_hlo(text: str) -> HloProgram:
    """The :class:`HloProgram` of optimized HLO text (``compiled.as_text()``)."""
    module = ""
    instructions: dict[str, Instruction] = {}
    computations: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in _joined_lines(text):
        if not module and (m := _MODULE.match(line)):
            module = m.group(1)
            continue
        if (found := _instruction(line)) is not None:
            name, opcode = found
            op_name = _OP_NAME.search(line)
            target = _TARGET.search(line)
            instructions[name] = Instruction(
                name=name,
                opcode=opcode,
                calls=tuple(_CALLS.findall(line)),
                op_name=op_name.group(1) if op_name else "",
                target=target.group(1) if target else "",
            )
            if current is not None:
                current.append(name)
            continue
        if (m := _COMPUTATION.match(line)) is not None:
            current = computations.setdefault(m.group(1), [])
        elif line.strip() == "}":
            current = None
    return HloProgram(module=module, instructions=instructions, computations=computations)
