"""``zoo kernels``: the installed kernels of every kind (attention, grouped matmul, cross
entropy, linear attention), or ``zoo kernels verify NAME``.

The listing reads the kernels' distribution metadata (entry points and requirements) without
importing JAX or any kernel, so it answers at once. Where a kernel serves needs the kernels
themselves and this machine's JAX backend: ``--here`` loads them (see :mod:`._kernels_here`).
"""

from __future__ import annotations

import argparse
import importlib.metadata

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from .._jax_range import (
    KINDS,
    Kind,
    declared_range,
    describe_running_jax,
    verified_jax,
    warn_outside_verified_range,
)
from .._table import format_table
from .._usage import UsageError

#: The distribution of the contracts and their reference kernels (``xla``, ``ragged_dot``).
CONTRACT_DISTRIBUTION = "zoo-attention"


def add_kernels_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "action", nargs="?", choices=["verify"], help="verify: run the conformance suite"
    )
    p.add_argument(
        "name", nargs="?", help="kernel name, e.g. xla, chunked, flash_tpu, ragged_dot, megablox"
    )
    p.add_argument(
        "--here",
        action="store_true",
        help="also load JAX and every kernel: the backend, where each kernel serves, where the "
        "default order picks it and whether it serves on this machine (takes seconds)",
    )


def _contract(name: str, attention: str | None, kind: Kind) -> str:
    """``1.x`` when the kernel's release admits the installed zoo-attention (whose major is the
    contracts'), else the range it asks for: the registry will refuse it."""
    declared = None if name == kind.reference else declared_range(name, CONTRACT_DISTRIBUTION, kind)
    if attention is None:
        return declared or "?"
    if declared is None or SpecifierSet(declared).contains(attention, prereleases=True):
        return f"{attention.split('.')[0]}.x"
    return f"needs:zoo-attention{declared}"


def installed_rows() -> list[dict[str, str]]:
    """One row per kernel entry point of each kind (and the references ``xla`` and
    ``ragged_dot``): name, kind, version, contract, verified JAX."""
    try:
        attention: str | None = importlib.metadata.version(CONTRACT_DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        attention = None
    rows = []
    for kind in KINDS:
        found = {
            ep.name: ep.dist.version if ep.dist is not None else "?"
            for ep in importlib.metadata.entry_points(group=kind.group)
        }
        if attention is not None and Version(attention) >= Version(kind.since):
            found.setdefault(kind.reference, attention)  # registered even without its entry point
        rows += [
            {
                "name": name,
                "kind": kind.name,
                "version": version,
                "contract": _contract(name, attention, kind),
                "verified on jax": verified_jax(name, kind) or "-",
            }
            for name, version in sorted(found.items())
        ]
    return rows


def run_kernels(args: argparse.Namespace) -> int:
    """List installed kernels, or run the conformance suite against one (``verify NAME``)."""
    if args.action is None:
        print(f"running on {describe_running_jax()}")
        if args.here:
            # Loads JAX and every kernel: only this path needs them.
            from ._kernels_here import here_rows

            rows = here_rows()
        else:
            rows = installed_rows()
        print(format_table(rows))
        kinds = {kind.name: kind for kind in KINDS}
        for row in rows:
            if row["kind"] in kinds:  # refused kernels have no kind to ask about
                warn_outside_verified_range(row["name"], row["version"], kinds[row["kind"]])
        if not args.here:
            print("where each serves: `zoo kernels --here` (loads JAX and the kernels)")
        return 0
    if args.name is None:
        raise UsageError("zoo kernels verify needs a kernel name, e.g. `zoo kernels verify xla`.")
    # Loads JAX and the kernel to verify.
    from ._kernels_here import run_verify

    return run_verify(args.name)
