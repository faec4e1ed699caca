"""``zoo-attention``: list the installed kernels, or run the conformance suite against one.

zoo-attention kernels          # name, version, contract, can it serve here (and why not)
zoo-attention verify NAME      # the conformance cases on this machine, one line a check

A minimal front end of this package alone; ``zoo kernels`` (zoo-train) is the full listing.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import jax
import jax.numpy as jnp

from . import testing
from ._registry import kernels, refused_kernels
from ._spec import make_spec


def kernel_rows() -> list[dict[str, str]]:
    """One row per installed kernel (refused ones included): whether it serves a typical
    training call on this machine."""
    q = jax.ShapeDtypeStruct((1, 1024, 8, 128), jnp.bfloat16)
    spec, _ = make_spec(q, q, q, is_causal=True)
    rows = []
    for name, kernel in sorted(kernels().items()):
        reason = kernel.check(spec)
        serves = "yes" if reason is None else f"no: {reason}"
        rows.append({"name": name, "version": kernel.version,
                     "contract": kernel.contract_version, "serves here": serves})  # fmt: skip
    for r in refused_kernels():
        rows.append({"name": r.name, "version": r.version, "contract": "?",
                     "serves here": f"refused: {r.reason}"})  # fmt: skip
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


def verify_line(index: int, row: dict[str, str]) -> str:
    """One check of ``testing.verify`` as a line, printed as it finishes (``index`` from 1)."""
    total = testing.verify_count()
    seconds = f"{row['seconds']:>6} s" if row["seconds"] else " " * 8
    detail = f"  {row['detail']}" if row["detail"] else ""
    return f"{index:>{len(str(total))}}/{total} {row['result']:<4} {seconds}  {row['case']}{detail}"


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``zoo-attention`` console script; returns the exit code."""
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
    print(f"verifying {args.name}: {testing.verify_count()} checks", flush=True)
    done: list[dict[str, str]] = []

    def show(row: dict[str, str]) -> None:
        done.append(row)
        print(verify_line(len(done), row), flush=True)

    rows, failed = testing.verify(args.name, on_row=show)
    print(f"{len(rows) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
