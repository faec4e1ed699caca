"""``zoo models`` and ``zoo kernels``: what can be trained, and with which attention kernels."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from .._jax_range import describe_running_jax, outside_verified_range, verified_jax
from .._usage import UsageError


def add_models_arguments(p: argparse.ArgumentParser) -> None:
    """``zoo models`` takes no arguments."""


def add_kernels_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "action", nargs="?", choices=["verify"], help="verify: run the conformance suite"
    )
    p.add_argument("name", nargs="?", help="kernel name, e.g. xla, chunked, flash_tpu")


def _listing() -> Any:
    """zoo_attention, imported late so ``zoo --help`` stays fast."""
    import zoo_attention

    return zoo_attention


def _human(n: int) -> str:
    for unit, size in (("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= size:
            return f"{n / size:.2f}{unit}"
    return str(n)


def run_models(args: argparse.Namespace) -> int:
    """List the model presets with their shapes and parameter counts."""
    import zoo_models

    rows = []
    for name in zoo_models.presets():
        c = zoo_models.get(name)
        rows.append(
            {
                "preset": name,
                "family": c.family,
                "layers": str(c.n_layers),
                "d_model": str(c.d_model),
                "heads q/kv": f"{c.n_heads}/{c.kv_heads}",
                "vocab": str(c.vocab_size),
                "params": _human(zoo_models.num_params(c)),
            }
        )
    print(_listing().format_table(rows))
    return 0


def run_kernels(args: argparse.Namespace) -> int:
    """List installed kernels, or run the conformance suite against one (``verify NAME``)."""
    if args.action is None:
        import jax

        listing = _listing()
        print(f"running on {describe_running_jax()}")
        print(f"backend: {jax.default_backend()}")
        rows = [_with_verified_jax(row) for row in listing.kernel_rows()]
        print(listing.format_table(rows))
        for row in rows:
            _warn_outside_verified_range(row["name"], row["version"])
        return 0
    if args.action != "verify":
        raise UsageError(f"Unknown kernels action {args.action!r}; use `zoo kernels verify NAME`.")
    if args.name is None:
        raise UsageError("zoo kernels verify needs a kernel name, e.g. `zoo kernels verify xla`.")
    import jax

    import zoo_attention

    if args.name not in zoo_attention.kernels():
        raise UsageError(
            f"Unknown kernel {args.name!r}; installed: {', '.join(sorted(zoo_attention.kernels()))}."
        )
    if args.name == "flash_tpu" and jax.default_backend() != "tpu":
        # No TPU here: run the real kernel in Pallas TPU interpret mode.
        os.environ["ZOO_FLASH_TPU_INTERPRET"] = "1"
        print("zoo: no TPU here; running flash_tpu in interpret mode", file=sys.stderr)
    kernel = zoo_attention.get_kernel(args.name)
    count = zoo_attention.verify_count()
    interpret = os.environ.get("ZOO_FLASH_TPU_INTERPRET") == "1" and jax.default_backend() != "tpu"
    # Measured on a 2-core CPU: a few seconds a check natively, ~15 s in interpret mode.
    each = 15 if interpret else 2
    _warn_outside_verified_range(kernel.name, kernel.version)
    print(
        f"verifying {kernel.name} {kernel.version} on {jax.default_backend()} "
        f"({describe_running_jax()}): {count} checks, "
        f"about {_duration(count * each)}{' in interpret mode' if interpret else ''}; each "
        "is printed as it finishes",
        file=sys.stderr,
        flush=True,
    )
    done: list[dict[str, str]] = []

    def show(row: dict[str, str]) -> None:
        done.append(row)
        print(zoo_attention.verify_line(len(done), row), flush=True)

    try:
        rows, failed = zoo_attention.verify(args.name, on_row=show)
    except Exception as err:  # a kernel that crashes the suite itself has failed it
        print(
            f"zoo: verifying {args.name} failed: {type(err).__name__}: {err}",
            file=sys.stderr,
        )
        return 1
    print(f"{len(rows) - failed} passed, {failed} failed")
    return 1 if failed else 0


def _warn_outside_verified_range(name: str, version: str) -> None:
    """One ``zoo:`` line on stderr when the running JAX is outside the kernel's verified range."""
    warning = outside_verified_range(name, version)
    if warning:
        print(f"zoo: {warning}", file=sys.stderr)


def _with_verified_jax(row: dict[str, str]) -> dict[str, str]:
    """``row`` with the JAX range its kernel's release was verified on, after ``contract``."""
    out = {}
    for key, value in row.items():
        out[key] = value
        if key == "contract":
            out["verified on jax"] = verified_jax(row["name"]) or "-"
    return out


def _duration(seconds: float) -> str:
    return f"{seconds / 60:.0f} minutes" if seconds >= 120 else f"{seconds:.0f} seconds"
