"""``zoo-attention``: list the installed kernels, or run the conformance suite against one.

zoo-attention kernels          # name, version, contract, where it serves, can it serve here
zoo-attention verify NAME      # the conformance cases on this machine, as a pass/fail table
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp

from ._kernel import AttentionKernel
from ._registry import kernels, refused_kernels
from ._resolve import REFERENCE
from ._spec import AttentionSpec, make_spec


def _probe_spec(dtype: str = "bfloat16") -> AttentionSpec:
    """A typical training call on this machine, used to ask each kernel whether it serves here."""
    q = jax.ShapeDtypeStruct((1, 1024, 8, 128), jnp.dtype(dtype))
    kv = jax.ShapeDtypeStruct((1, 1024, 8, 128), jnp.dtype(dtype))
    spec, _ = make_spec(q, kv, kv, is_causal=True)
    return spec


PLATFORMS = ("cpu", "gpu", "tpu")


def serves_on(kernel: AttentionKernel, spec: AttentionSpec) -> tuple[str, ...]:
    """The platforms whose probe call ``kernel`` accepts when named (its ``check``), whether
    or not their default order picks it unnamed (``kernel.platforms``). Another platform is
    asked without this machine's device kind: a TPU kernel asked about a ``'cpu'`` TPU would
    warn that it has no row for that chip."""
    return tuple(p for p in PLATFORMS if kernel.check(_on_platform(spec, p)) is None)


def _on_platform(spec: AttentionSpec, platform: str) -> AttentionSpec:
    """``spec`` on ``platform``: this machine's device kind only on its own platform."""
    if platform == spec.platform:
        return spec
    return dataclasses.replace(spec, platform=platform, device_kind=None)


def kernel_rows() -> list[dict[str, str]]:
    """One row per installed kernel (refused ones included) for listings: where it serves when
    named (``serves on``), where the default order picks it (``default on``; ``xla`` is every
    platform's fallback) and whether it serves on this machine."""
    spec = _probe_spec()
    rows = []
    for name, kernel in sorted(kernels().items()):
        reason = kernel.check(spec)
        rows.append(
            {
                "name": name,
                "version": kernel.version,
                "contract": kernel.contract_version,
                "serves on": ",".join(serves_on(kernel, spec)) or "-",
                "default on": "fallback" if name == REFERENCE else ",".join(kernel.platforms),
                "serves here": "yes" if reason is None else f"no: {reason}",
            }
        )
    for refused in refused_kernels():
        rows.append(
            {
                "name": refused.name,
                "version": refused.version,
                "contract": "?",
                "serves on": "",
                "default on": "",
                "serves here": f"refused: {refused.reason}",
            }
        )
    return rows


def format_table(rows: list[dict[str, str]]) -> str:
    """Plain fixed-width table; the first row's keys are the header."""
    if not rows:
        return "(none)"
    cols = list(rows[0])
    widths = {c: max(len(c), *(len(str(r[c])) for r in rows)) for c in cols}
    lines = ["  ".join(c.ljust(widths[c]) for c in cols).rstrip()]
    lines.append("  ".join("-" * widths[c] for c in cols))
    lines += ["  ".join(str(r[c]).ljust(widths[c]) for c in cols).rstrip() for r in rows]
    return "\n".join(lines)


def verify_count() -> int:
    """How many checks :func:`verify` runs: every conformance case and the named-scope check."""
    from .testing import CASES

    return len(CASES) + 1


def verify_line(index: int, row: dict[str, str]) -> str:
    """One check of :func:`verify` as a line, printed as it finishes (``index`` from 1)."""
    total = verify_count()
    seconds = f"{row['seconds']:>6} s" if row["seconds"] else " " * 8
    detail = f"  {row['detail']}" if row["detail"] else ""
    return f"{index:>{len(str(total))}}/{total} {row['result']:<4} {seconds}  {row['case']}{detail}"


def verify(
    name: str, on_row: Callable[[dict[str, str]], None] | None = None
) -> tuple[list[dict[str, str]], int]:
    """Run every conformance case against kernel ``name``; return table rows and failure count.
    ``on_row(row)`` is called as each check finishes (a case takes seconds, or many in Pallas
    interpret mode on a CPU)."""
    from .testing import CASES, named_scope_failures, run_case

    rows, failed = [], 0
    report = on_row or (lambda row: None)
    for case in CASES:
        start = time.perf_counter()
        try:
            failures = run_case(name, case)
        except Exception as err:  # a crash is a failure of the case, reported as such
            failures = [f"[{case.name}] raised {type(err).__name__}: {err}"]
        failed += bool(failures)
        rows.append(
            {
                "case": case.name,
                "result": "FAIL" if failures else "pass",
                "seconds": f"{time.perf_counter() - start:.2f}",
                "detail": failures[0] if failures else "",
            }
        )
        report(rows[-1])
    try:
        scope = named_scope_failures(name)
    except Exception as err:  # a kernel that refuses the probe call has failed the check
        scope = [f"raised {type(err).__name__}: {err}"]
    failed += bool(scope)
    rows.append(
        {
            "case": "named-scope",
            "result": "FAIL" if scope else "pass",
            "seconds": "",
            "detail": "; ".join(scope),
        }
    )
    report(rows[-1])
    return rows, failed


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="zoo-attention", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("kernels", help="list installed attention kernels")
    ver = sub.add_parser("verify", help="run the conformance suite against one kernel")
    ver.add_argument("name")
    args = parser.parse_args(argv)
    try:
        return _run(args)
    except Exception as err:  # a user sees one sentence, never a traceback
        print(f"zoo-attention {args.command}: failed: {type(err).__name__}: {err}", file=sys.stderr)
        return 1


def _run(args: argparse.Namespace) -> int:
    if args.command == "kernels":
        print(f"backend: {jax.default_backend()}")
        print(format_table(kernel_rows()))
        return 0
    if args.name not in kernels():
        print(
            f"zoo-attention: unknown kernel {args.name!r}; installed: {', '.join(sorted(kernels()))}.",
            file=sys.stderr,
        )
        return 2
    print(f"verifying {args.name}: {verify_count()} checks", flush=True)
    done: list[dict[str, str]] = []

    def show(row: dict[str, str]) -> None:
        done.append(row)
        print(verify_line(len(done), row), flush=True)

    rows, failed = verify(args.name, on_row=show)
    print(f"{len(rows) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
